// The reference chat page: renders a turn's blocks in their order, one element per block with its
// kind and author in data attributes; streams a turn over SSE (fetch, so it can POST), resumes
// from the last sequence after a drop, renders the stored conversation the same way on load, and
// follows the conversation's feed (one EventSource) for the turns the server writes on its own.
// It never polls.
"use strict";

const ID = /^conv_[a-z0-9][a-z0-9_]{0,63}$/;
const main = document.getElementById("conversation");
const statusLine = document.getElementById("status");
const form = document.getElementById("composer");
const input = document.getElementById("message");
const tokens = document.getElementById("tokens");
const API = "/api";
let busy = false;

// 128 random bits: a conversation's or a turn's id is not guessable from another's
function freshId(prefix) {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const params = new URLSearchParams(location.search);
let cid = params.get("c");
const fresh = !cid || !ID.test(cid); // a conversation this page starts: nothing stored yet
if (fresh) {
  cid = freshId("conv_");
  params.set("c", cid);
  history.replaceState(null, "", "?" + params.toString());
}

// --- rendering (the same functions for streamed and reloaded turns) ------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("data-")) node.setAttribute(name, String(value));
    else node[name] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

function badges(kind, author) {
  return [
    el("span", { class: "badge kind" }, kind),
    el("span", { class: "badge " + author, title: author + "-written" }, author),
  ];
}

const KNOWN = new Set(["answer", "transition", "receipt", "notice", "interaction", "artifact"]);

function renderBlock(block) {
  const kind = KNOWN.has(block.kind) ? block.kind : "unknown";
  const author = block.author === "model" ? "model" : "server";
  const node = el("div", {
    class: "block",
    "data-kind": kind,
    "data-block-id": block.block_id || "",
    "data-author": author,
    "data-severity": block.severity,
  });
  node.append(...badges(kind === "unknown" ? block.kind : kind, author));
  if (kind === "answer" || kind === "transition") {
    node.append(el("span", { class: "text" }, block.text ?? ""));
  } else if (kind === "receipt") {
    node.append(el("span", { class: "title" }, block.title));
    if (block.body) node.append(el("div", { class: "body" }, block.body));
    node.append(el("div", { class: "meta" },
      `${block.status_code} · backed by ${block.event_ids.length} committed event(s)`));
  } else if (kind === "notice") {
    node.append(el("span", { class: "text" }, block.text), el("div", { class: "meta" }, block.code));
  } else if (kind === "interaction") {
    node.setAttribute("data-interaction-id", block.interaction_id);
    node.setAttribute("data-case-revision", block.case_revision);
    node.append(el("span", { class: "title" }, block.title));
    if (block.body) node.append(el("div", { class: "body" }, block.body));
    for (const entry of block.review_entries || []) {
      node.append(el("div", { class: "meta" }, `${entry.label}: ${entry.before ?? "—"} → ${entry.after ?? "—"}`));
    }
    const options = el("div", { class: "options" });
    for (const option of block.options) {
      const button = el("button", {
        type: "button",
        "data-option-id": option.option_id,
        "data-style": option.style,
        disabled: busy,
      }, option.label);
      button.addEventListener("click", () => answerCard(block, option));
      options.append(button);
    }
    node.append(options);
  } else if (kind === "artifact") {
    node.append(el("span", { class: "title" }, block.name), el("div", { class: "meta" }, block.media_type));
  } else {
    node.classList.add("opaque");
    node.append(el("span", { class: "text" }, "(a block this page does not know how to show)"));
  }
  return node;
}

// One exchange per turn: what the user said (when they said something) and the turn's blocks.
// Exchanges the feed has delivered carry its sequence and stand in that order (the commit order
// a reload shows); a turn still streaming, or a follow-up still awaited, stands after them.
function exchange(turnId) {
  let node = main.querySelector(`article.exchange[data-turn-id="${turnId}"]`);
  if (!node) {
    node = el("article", { class: "exchange", "data-turn-id": turnId },
      el("section", { class: "turn", "data-turn-id": turnId },
        el("div", { class: "blocks" }), el("div", { class: "progress" })));
    main.append(node);
  }
  return node;
}

function turnSection(turnId) {
  return exchange(turnId).querySelector("section.turn");
}

function place(node, sequence) {
  node.setAttribute("data-sequence", String(sequence));
  node.removeAttribute("data-pending");
  let before = null;
  for (const other of main.querySelectorAll("article.exchange")) {
    if (other === node) continue;
    const theirs = other.getAttribute("data-sequence");
    if (theirs === null || Number(theirs) > sequence) { before = other; break; }
  }
  if (node.nextElementSibling !== before) main.insertBefore(node, before);
}

// The stored turn, exactly as a reload renders it; a streamed turn's section is replaced.
function renderTurn(turn) {
  const section = turnSection(turn.turn_id);
  section.setAttribute("data-status", turn.status);
  section.querySelector(".blocks").replaceChildren(...turn.blocks.map(renderBlock));
  section.querySelector(".progress").textContent = "";
  return section;
}

function isStored(turnId) {
  return turnSection(turnId).hasAttribute("data-status");
}

function userBubble(said, turnId) {
  if (!said) return null;
  let text = said.text;
  if (said.interaction_response) {
    const { interaction_id: iid, option_id: oid } = said.interaction_response;
    const button = main.querySelector(`[data-interaction-id="${iid}"] [data-option-id="${oid}"]`);
    const chose = `chose “${button ? button.textContent : oid}”`;
    text = text ? `${text} (${chose})` : chose;
  }
  return text ? el("div", { class: "user", "data-turn-id": turnId || "" }, text) : null;
}

function showSaid(turnId, said) {
  const node = exchange(turnId);
  const bubble = userBubble(said, turnId);
  if (bubble && !node.querySelector(".user")) node.prepend(bubble);
}

function setBusy(value) {
  busy = value;
  form.querySelector("button").disabled = value;
  for (const button of main.querySelectorAll(".options button")) button.disabled = value;
}

// --- the stream --------------------------------------------------------------------------------

// Frames of a text/event-stream body, as {id, event, data}; comments (keepalives) are skipped.
async function* frames(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer = (buffer + value).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const frame = { id: null, event: "message", data: [] };
      for (const line of raw.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") frame.data.push(value);
        else if (field === "id") frame.id = value;
        else if (field === "event") frame.event = value;
      }
      if (frame.data.length) yield { ...frame, data: frame.data.join("\n") };
    }
  }
}

// One turn's stream: applies each event once (by sequence) and says whether the turn ended. A turn
// the feed has already delivered as stored is shown as stored: its stream only ends it.
class TurnStream {
  constructor() { this.turnId = null; this.last = 0; this.ended = false; this.followUps = []; }

  apply(event) {
    if (event.sequence <= this.last) return; // seen before a reconnect
    this.last = event.sequence;
    this.turnId = event.turn_id;
    if (event.type === "turn.completed") {
      renderTurn(event.turn); // the stored turn: exactly what a reload shows
      this.ended = true;
      return;
    }
    if (event.type === "turn.failed") this.ended = true;
    if (isStored(event.turn_id)) return;
    const section = turnSection(event.turn_id);
    const blocks = section.querySelector(".blocks");
    const progress = section.querySelector(".progress");
    switch (event.type) {
      case "turn.phase":
        progress.textContent = `phase: ${event.phase}`;
        break;
      case "turn.step":
        progress.textContent = `step: ${event.step}`;
        break;
      case "content.block.started": {
        const node = renderBlock({ ...event.fields, kind: event.block_kind, author: event.author });
        if (!("text" in event.fields)) node.classList.add("streaming");
        const before = blocks.children[event.index] || null;
        blocks.insertBefore(node, before);
        break;
      }
      case "content.block.delta": {
        const node = blocks.querySelector(`[data-block-id="${event.block_id}"] .text`);
        if (node) node.textContent += event.text;
        break;
      }
      case "content.block.completed": {
        const node = blocks.querySelector(`[data-block-id="${event.block_id}"]`);
        const done = renderBlock(event.block);
        if (node) node.replaceWith(done); else blocks.append(done);
        break;
      }
      case "turn.failed":
        progress.textContent = "";
        section.append(el("div", { class: "failed", "data-code": event.code },
          `This turn failed (${event.code}); nothing was changed.`));
        break;
    }
  }

  async read(response) {
    for await (const frame of frames(response)) {
      if (frame.event === "error") throw new Error(JSON.parse(frame.data).code);
      if (frame.event === "follow_ups") {
        this.followUps = JSON.parse(frame.data).turn_ids;
        continue;
      }
      this.apply(JSON.parse(frame.data));
    }
  }
}

// A turn the server will write later (the answer to a click that went out): its place is held
// until the feed delivers it.
function awaitFollowUp(turnId) {
  if (main.querySelector(`article.exchange[data-turn-id="${turnId}"]`)) return;
  const node = exchange(turnId);
  node.setAttribute("data-pending", "true");
  node.querySelector(".progress").textContent = "an answer will follow here…";
}

async function refusal(response) {
  try {
    const body = await response.json();
    return `${body.message} (${body.code})`;
  } catch {
    return `the server answered ${response.status}`;
  }
}

async function sendTurn(body, said) {
  setBusy(true);
  statusLine.textContent = "";
  const stream = new TurnStream();
  const turnId = freshId("turn_");
  showSaid(turnId, said);
  try {
    const mode = tokens.checked ? "tokens" : "whole";
    const response = await fetch(`${API}/conversations/${cid}/turns?mode=${mode}`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ ...body, turn_id: turnId }),
    });
    if (!response.ok) {
      exchange(turnId).remove();
      statusLine.textContent = await refusal(response);
      return;
    }
    stream.turnId = response.headers.get("x-turn-id") || turnId;
    try {
      await stream.read(response);
    } catch (drop) {
      statusLine.textContent = "reconnecting…";
    }
    await resume(stream);
    for (const id of stream.followUps) awaitFollowUp(id);
    follow(); // the conversation exists now: its feed delivers the follow-ups
  } catch (failure) {
    statusLine.textContent = `could not reach the server (${failure.message})`;
  } finally {
    setBusy(false);
    window.scrollTo(0, document.body.scrollHeight);
  }
}

// After a drop: the turn's events after the last one seen, until the turn ends.
async function resume(stream) {
  for (let attempt = 0; !stream.ended && attempt < 20; attempt++) {
    if (attempt) await new Promise((done) => setTimeout(done, Math.min(250 * attempt, 2000)));
    try {
      const response = await fetch(`${API}/turns/${stream.turnId}/events`, {
        headers: { "last-event-id": String(stream.last), accept: "text/event-stream" },
      });
      if (response.status === 204) return; // nothing after what was seen
      if (!response.ok) {
        statusLine.textContent = await refusal(response);
        return;
      }
      await stream.read(response);
    } catch {
      statusLine.textContent = "reconnecting…";
    }
  }
  if (stream.ended) statusLine.textContent = "";
}

function answerCard(block, option) {
  if (busy) return;
  sendTurn({
    interaction_response: {
      interaction_id: block.interaction_id,
      option_id: option.option_id,
      expected_case_revision: block.case_revision,
    },
  }, { interaction_response: { interaction_id: block.interaction_id, option_id: option.option_id } });
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = input.value.trim();
  if (!text || busy) return;
  input.value = "";
  sendTurn({ text }, { text });
});

// --- the conversation: its stored turns, then its feed --------------------------------------------

// What the user sent for each stored turn (by turn id), and the stored turns, oldest first.
async function stored() {
  const response = await fetch(`${API}/conversations/${cid}/turns?limit=200`);
  if (response.status === 404) return { turns: [], inputs: {} }; // nothing said yet
  if (!response.ok) throw new Error(await refusal(response));
  const { turns, inputs } = await response.json();
  return { turns, inputs: inputs || {} };
}

// ONE EventSource for the conversation: every turn stored in it, in commit order, whichever path
// wrote it (this page's turns, another tab's, the server's follow-ups). It resumes by itself
// after a drop (Last-Event-ID); a refused or closed one is opened again after the last sequence.
let feed = null;
let lastSequence = 0;
let reopenMs = 500;

function follow() {
  if (feed) return;
  feed = new EventSource(`${API}/conversations/${cid}/feed?after=${lastSequence}`);
  feed.addEventListener("open", () => { reopenMs = 500; });
  feed.addEventListener("turn", (message) => {
    const sequence = Number(message.lastEventId);
    if (sequence <= lastSequence) return;
    lastSequence = sequence;
    delivered(JSON.parse(message.data), sequence);
  });
  feed.addEventListener("error", () => {
    if (feed.readyState !== EventSource.CLOSED) return; // the browser reconnects by itself
    feed = null;
    setTimeout(follow, reopenMs);
    reopenMs = Math.min(reopenMs * 2, 15_000);
  });
}

function delivered(turn, sequence) {
  const known = main.querySelector(`article.exchange[data-turn-id="${turn.turn_id}"]`);
  const node = exchange(turn.turn_id);
  if (!isStored(turn.turn_id)) renderTurn(turn); // a stored turn never changes: shown once
  place(node, sequence);
  if (!known) {
    // written elsewhere: what the user said for it, if they said anything
    stored().then(({ inputs }) => showSaid(turn.turn_id, inputs[turn.turn_id])).catch(() => {});
  }
  window.scrollTo(0, document.body.scrollHeight);
}

async function load() {
  if (fresh) {
    document.body.setAttribute("data-loaded", "true");
    return;
  }
  try {
    const { turns, inputs } = await stored();
    for (const turn of turns) {
      showSaid(turn.turn_id, inputs[turn.turn_id]);
      renderTurn(turn);
    }
    if (turns.length) follow();
  } catch (failure) {
    statusLine.textContent = failure.message;
  }
  document.body.setAttribute("data-loaded", "true");
  window.scrollTo(0, document.body.scrollHeight);
}

load();
