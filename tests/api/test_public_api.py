"""The public API an adopter lives in: package tops only, nothing heavy loaded by importing them,
and a runtime whose collaborators cannot be swapped after construction."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import turnframe_core
import turnframe_runtime
import turnframe_store
import turnframe_test

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("turnframe_core", "turnframe_store", "turnframe_runtime")
SQL_STACK = {"sqlalchemy", "sqlmodel", "alembic"}
#: What an adopter writes a workflow, an interpreter, cards and facts with.
ADOPTER_NAMES = (
    "ArgumentSpec", "AmbiguousTarget", "ApplyOperation", "CardTarget", "CompiledCommand",
    "ConfirmCommands", "ConfirmationPolicy", "Constraint", "ConstraintKind", "DeclineAndRecord",
    "DomainRefusal", "Evidence", "ExternalSaga", "HandleTarget", "InteractionRequirement",
    "NameableRecord", "NamedReference", "NextStep", "Obligation", "OperationSpec",
    "OperationalOutcome", "OptionStyle", "PerCase", "PhaseOwnership", "ProposedAct", "Question",
    "ResolvedAct", "RiskClass", "Understanding", "WorkflowDefinition", "WorkflowView",
)  # fmt: skip
#: The core's whole top: the adopter names, every error type core raises, and `codes`.
CORE_SURFACE = (
    "AlreadyAnswered", "AmbiguousTarget", "ApplyOperation", "ArgumentSpec", "Brief", "CardTarget",
    "CaseKey", "CaseRef", "ClaimClass", "ClaimGuardViolation", "CommandBatch", "CommandEnvelope",
    "CommandPolicy", "CompiledCommand", "ConfirmCommands", "ConfirmationPolicy", "Constraint",
    "ConstraintKind", "DeclineAndRecord", "DomainEvent", "DomainRefusal", "Evidence",
    "ExternalSaga", "ForbiddenAuthorship", "ForgedBlock", "FreeformNotAllowed",
    "FreeformRequiredMissing", "FreeformTooLong", "HandleTarget", "IdempotencyKeyMismatch",
    "IllegalTransition", "InteractionExpired", "InteractionKind", "InteractionNotActive",
    "InteractionNotFound", "InteractionOption", "InteractionPayload", "InteractionRejected",
    "InteractionRequirement", "InteractionResponse", "InvalidId", "InvalidInteraction",
    "InvalidTurnInput", "InvalidVisMessage", "Localized", "MalformedModelOutput", "Move",
    "MoveKind", "MovesRefused", "NameableRecord", "NamedReference", "NextStep", "Obligation",
    "OperationSpec", "OperationalOutcome",
    "OptionStyle", "PayloadCorrupt", "PerCase", "PhaseOwnership", "ProposedAct", "Question",
    "ReceiptSeverity", "ReceiptSpec", "Referable", "ReferableKind", "ReferableOption",
    "ResolvedAct", "RiskClass", "ScopeViolation", "ServerEvent", "StaleInteraction", "StateValue",
    "StreamEvent",
    "StreamMode", "TerminalStatus", "TurnInput", "TurnframeError", "UlidIdSource", "Understanding",
    "UnderstandingRejected", "UnknownOption", "UnsafeUri", "UnsupportedSchemaVersion", "ValueKind",
    "ValueRule", "ViewInvariantViolation", "Workflow", "WorkflowDefinition", "WorkflowView",
    "as_workflow", "codes", "derive_id", "is_terminal",
    # the builders an interpreter writes a proposal with (they were the test kit's)
    "act", "ambiguous_act", "constraint", "named_record", "question", "understanding_of",
)  # fmt: skip
#: Names the core top exported before it was cut to the adopter surface: they still resolve.
OLDER_CORE_NAMES = {
    "AssistantTurn": "turnframe_core.turn",
    "ReplayRecord": "turnframe_core.replay",
    "TurnCompleted": "turnframe_core.stream",
    "AnswerBlock": "turnframe_core.blocks",
    "DeclaresCopy": "turnframe_core.workflow",
    "check_view": "turnframe_core.workflow",
    "canonical_json": "turnframe_core.canonical",
    "SequentialIdSource": "turnframe_core.ids",
    "Interaction": "turnframe_core.interactions",
    "NarratableFact": "turnframe_core.facts",
}


def test_importing_the_library_packages_loads_no_sql_stack() -> None:
    probe = (
        "import json, sys\nimport turnframe_core, turnframe_store, turnframe_runtime\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert set(json.loads(done.stdout)) & SQL_STACK == set()


def test_importing_the_runtime_loads_no_web_framework() -> None:
    probe = (
        "import json, sys\nimport turnframe_runtime\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert "starlette" not in json.loads(done.stdout)


def test_the_sse_helpers_a_web_app_needs_are_exported_from_the_runtime() -> None:
    from turnframe_runtime import sse

    for name in sse.__all__:
        if name != "KEEPALIVE_FRAME":
            assert getattr(turnframe_runtime, name) is getattr(sse, name)
            assert name in turnframe_runtime.__all__


def test_the_web_layer_exports_its_app_factory_and_options() -> None:
    import turnframe_runtime.http as http

    for name in ("create_app", "CorsConfig", "HttpLimits", "Unauthenticated", "STATUS"):
        assert name in http.__all__
    assert [n for n in http.__all__ if not hasattr(http, n)] == []


def test_every_name_an_adopter_needs_is_exported_from_the_core() -> None:
    missing = [name for name in ADOPTER_NAMES if name not in turnframe_core.__all__]
    assert missing == []


@pytest.mark.parametrize("package", [turnframe_core, turnframe_store, turnframe_runtime])
def test_every_exported_name_exists(package: object) -> None:
    assert [n for n in package.__all__ if not hasattr(package, n)] == []  # type: ignore[attr-defined]


def test_the_core_top_exports_the_adopter_surface_and_nothing_else() -> None:
    assert sorted(turnframe_core.__all__) == sorted(CORE_SURFACE)


def test_a_name_the_core_top_exported_before_still_resolves_to_its_home_without_a_warning() -> None:
    code = (
        "import importlib, warnings\n"
        "warnings.simplefilter('error')\n"
        "import turnframe_core\n"
        f"for name, home in {OLDER_CORE_NAMES!r}.items():\n"
        "    assert getattr(turnframe_core, name) is getattr(importlib.import_module(home), name)\n"
        "    assert name in dir(turnframe_core)\n"
        "from turnframe_core import AssistantTurn, ReplayRecord\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        turnframe_core.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_plumbing_is_not_part_of_the_core_api() -> None:
    plumbing = [n for n in turnframe_core.__all__ if re.fullmatch(r"derive_(?!id$)\w+", n)]
    assert plumbing == []
    assert "canonical_bytes" not in turnframe_core.__all__


def test_the_test_kit_exports_the_harness_and_the_scripted_ports() -> None:
    for name in ("DeskHarness", "ScriptedInterpreter", "ScriptedNarrator", "StoreBackend"):
        assert name in turnframe_test.__all__


def _imported_modules(source: str) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return modules


def test_the_guide_and_the_sample_domain_import_only_from_package_tops() -> None:
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    code = "\n".join(re.findall(r"```python\n(.*?)```", guide, flags=re.S))
    code += (ROOT / "turnframe_test" / "domains" / "travel.py").read_text(encoding="utf-8")
    deep = [m for m in _imported_modules(code) if m.split(".")[0] in LIBRARIES and "." in m]
    assert deep == []


def test_the_runtime_refuses_stores_whose_calls_cannot_commit_together() -> None:
    from turnframe_runtime import StoresWithoutTransactions, TurnRuntime
    from turnframe_store import ROLES, MemoryStores, Stores
    from turnframe_test.domains.travel import TripDesk, TripDirectory, TripExecutor, TripWorkflow

    memory = MemoryStores()
    plain = Stores(**{role: getattr(memory, role) for role, _ in ROLES})
    desk = TripDesk()
    with pytest.raises(StoresWithoutTransactions):
        TurnRuntime(
            stores=plain,
            workflows=[TripWorkflow()],
            directory=TripDirectory(desk),
            executor=TripExecutor(desk),
        )


def test_the_conversation_feed_is_public() -> None:
    assert "FeedEntry" in turnframe_store.__all__
    assert "FeedItem" in turnframe_runtime.__all__
    runtime = turnframe_runtime.TurnRuntime
    assert all(
        callable(getattr(runtime, name, None))
        for name in ("follow_conversation", "follow_up_turns", "feed_followers")
    )


def test_the_brief_s_memory_is_public_in_its_home_module() -> None:
    from turnframe_core import turn, understanding

    memory_names = (
        "MEMORY_ITEMS", "MEMORY_MAX_CHARS", "MEMORY_MISSING", "MEMORY_TURNS", "CardEnding",
        "ConversationMemory", "ExpectationKind", "RememberedCard", "RememberedOffer",
        "RememberedQuestion", "RememberedTurn",
    )  # fmt: skip
    assert [name for name in memory_names if name not in understanding.__all__] == []
    memory = turnframe_core.Brief.model_fields["memory"]
    assert memory.annotation is understanding.ConversationMemory
    assert turn.ExpectationKind is understanding.ExpectationKind  # one kind, read by both
