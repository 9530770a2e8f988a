"""A precompiled rendering of the plainest server copy, without building a jinja2 context.

Most templates are a `{% trans %}` block, or a few under `{% if %}` tests of a parameter
against a constant: the translated message is fixed per locale, so rendering such a template
is choosing a branch and formatting one string. `plan` turns a template of that shape (and only
that shape) into a function of the parameters; any other template gets no plan and renders
through jinja2.

What a plan may do is a strict subset of what the sandboxed template does: read a parameter by
name (a name the parameters lack, or that shadows `gettext`, is not read: the plan gives up),
compare with `==`/`!=`, test truth, `defined`/`undefined`/`none`, `and`/`or`/`not`, apply one of
the copy layer's own formatting filters with constant or parameter arguments, output text and
values as `str`, and format a translated message with `%` exactly as the i18n extension's
newstyle `gettext` does. It reads no attribute or item and calls nothing else, so the sandbox
has nothing to refuse. A plan that raises gives up too: the caller renders through jinja2,
which either renders or raises the error it always raised. A test renders every template of
the library's and the sample catalogs both ways, in every locale, and compares.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import Environment, nodes

__all__ = ["Plan", "plan"]

#: a template's text from its parameters (raises when it cannot: the caller renders the template)
Plan = Callable[[Mapping[str, Any]], str]
_Expr = Callable[[Mapping[str, Any]], Any]

#: the filters a plan may apply: the copy layer's own (`_filters`), each a pure function
PLAN_FILTERS = frozenset({"data", "number", "money", "percent", "date", "datetime"})
_PLAN_TESTS = frozenset({"defined", "undefined", "none"})


class _Unsupported(Exception):
    """The template has a node a plan does not render."""


class _GiveUp(Exception):
    """This rendering needs jinja2 (a parameter missing, or one that shadows a global)."""


def plan(env: Environment, source: str, gettext: Callable[[str], str]) -> Plan | None:
    """`source` as a plan in `env` whose messages translate through `gettext` (the function the
    i18n extension was installed with), or None when it is not of the plainest shape."""
    if env.autoescape is not False or env.finalize is not None:
        return None
    try:
        tree = env.parse(source)
        return _Planner(env, gettext).body(tree.body)
    except Exception:  # a syntax error, or a shape a plan does not render: jinja2's to judge
        return None


class _Planner:
    def __init__(self, env: Environment, gettext: Callable[[str], str]) -> None:
        self.env = env
        self.gettext = gettext

    def body(self, body: list[nodes.Node]) -> Plan:
        parts: list[str | Plan] = []
        for node in body:
            if isinstance(node, nodes.Output):
                for child in node.nodes:
                    if isinstance(child, nodes.TemplateData):
                        parts.append(child.data)
                    else:
                        parts.append(_as_text(self.expr(child)))
            elif isinstance(node, nodes.If):
                parts.append(self.branch(node))
            else:
                raise _Unsupported(type(node).__name__)
        return _joined(parts)

    def branch(self, node: nodes.If) -> Plan:
        tests = [(self.expr(node.test), self.body(node.body))]
        tests.extend((self.expr(other.test), self.body(other.body)) for other in node.elif_)
        otherwise = self.body(node.else_)

        def chosen(params: Mapping[str, Any]) -> str:
            for test, body in tests:
                if test(params):
                    return body(params)
            return otherwise(params)

        return chosen

    def expr(self, node: nodes.Node) -> _Expr:
        if isinstance(node, nodes.Const):
            value = node.value
            return lambda _params: value
        if isinstance(node, nodes.Name) and node.ctx == "load":
            return _name(node.name)
        if isinstance(node, nodes.Call):
            return self.call(node)
        if isinstance(node, nodes.Filter):
            return self.filter(node)
        if isinstance(node, nodes.Test):
            return self.test(node)
        if isinstance(node, nodes.Compare) and len(node.ops) == 1:
            return self.compare(node)
        if isinstance(node, nodes.And):
            left, right = self.expr(node.left), self.expr(node.right)
            return lambda params: left(params) and right(params)
        if isinstance(node, nodes.Or):
            left, right = self.expr(node.left), self.expr(node.right)
            return lambda params: left(params) or right(params)
        if isinstance(node, nodes.Not):
            operand = self.expr(node.node)
            return lambda params: not operand(params)
        raise _Unsupported(type(node).__name__)

    def call(self, node: nodes.Call) -> _Expr:
        """The i18n extension's `gettext(message, **variables)` (newstyle): the translation,
        fixed per locale, `%`-formatted with the variables (always, as the extension does)."""
        if not (
            isinstance(node.node, nodes.Name)
            and node.node.name == "gettext"
            and len(node.args) == 1
            and isinstance(node.args[0], nodes.Const)
            and isinstance(node.args[0].value, str)
            and node.dyn_args is None
            and node.dyn_kwargs is None
        ):
            raise _Unsupported("call")
        translated = self.gettext(node.args[0].value)
        variables = self.keywords(node.kwargs)

        def gettext(params: Mapping[str, Any]) -> Any:
            if "gettext" in params:  # a parameter shadows the global: jinja2's to call
                raise _GiveUp("gettext")
            return translated % {key: value(params) for key, value in variables}

        return gettext

    def filter(self, node: nodes.Filter) -> _Expr:
        if node.name not in PLAN_FILTERS or node.node is None:
            raise _Unsupported(f"filter {node.name}")
        if node.dyn_args is not None or node.dyn_kwargs is not None:
            raise _Unsupported("filter arguments")
        function: Callable[..., Any] = self.env.filters[node.name]
        operand = self.expr(node.node)
        args = [self.expr(arg) for arg in node.args]
        kwargs = self.keywords(node.kwargs)
        if not args and not kwargs:
            return lambda params: function(operand(params))
        if len(args) == 1 and not kwargs:
            (arg,) = args
            return lambda params: function(operand(params), arg(params))

        def filtered(params: Mapping[str, Any]) -> Any:
            return function(
                operand(params),
                *[arg(params) for arg in args],
                **{key: value(params) for key, value in kwargs},
            )

        return filtered

    def keywords(self, found: list[Any]) -> list[tuple[str, _Expr]]:
        keywords: list[tuple[str, _Expr]] = []
        for keyword in found:
            if not isinstance(keyword, nodes.Keyword):
                raise _Unsupported(type(keyword).__name__)
            keywords.append((keyword.key, self.expr(keyword.value)))
        return keywords

    def test(self, node: nodes.Test) -> _Expr:
        if node.name not in _PLAN_TESTS or node.args or node.kwargs or node.node is None:
            raise _Unsupported(f"test {node.name}")
        if node.dyn_args is not None or node.dyn_kwargs is not None:
            raise _Unsupported("test arguments")
        function: Callable[..., Any] = self.env.tests[node.name]  # type: ignore[assignment]
        operand = self.expr(node.node)
        return lambda params: function(operand(params))

    def compare(self, node: nodes.Compare) -> _Expr:
        operand = node.ops[0]
        left, right = self.expr(node.expr), self.expr(operand.expr)
        if operand.op == "eq":
            return lambda params: left(params) == right(params)
        if operand.op == "ne":
            return lambda params: left(params) != right(params)
        raise _Unsupported(f"compare {operand.op}")


def _name(name: str) -> _Expr:
    def read(params: Mapping[str, Any]) -> Any:
        try:
            return params[name]
        except KeyError:  # a global, or undefined: jinja2's to resolve or refuse
            raise _GiveUp(name) from None

    return read


def _as_text(expr: _Expr) -> Plan:
    return lambda params: str(expr(params))


def _joined(parts: list[str | Plan]) -> Plan:
    if len(parts) == 1 and not isinstance(parts[0], str):
        return parts[0]
    if all(isinstance(part, str) for part in parts):
        text = "".join(part for part in parts if isinstance(part, str))
        return lambda _params: text
    pieces = [(part, None) if isinstance(part, str) else ("", part) for part in parts]

    def joined(params: Mapping[str, Any]) -> str:
        return "".join(text if render is None else render(params) for text, render in pieces)

    return joined
