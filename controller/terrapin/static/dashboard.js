// Terrapin dashboard: one ES module, no framework, no build step (docs/operations.md says why).
// Reads: /topology, /status/switches, /reservations, /monitor, /events, and the live stream
// /events/stream (server-sent events). Writes (POST/DELETE /reservations) carry the bearer
// token the operator entered once (the page asks for it only to change something, and shows the
// role it gives); it is kept in sessionStorage, so it lasts as long as the tab.

const TOKEN_KEY = "terrapin.token";
const HISTORY = 90; // polls of delay history kept per queue
const LEVELS = [1, 2, 3, 4, 5, 6];

const state = {
  topology: { switches: [], hosts: [] },
  status: [],
  reservations: [],
  monitor: null,
  events: new Map(), // id → event
  history: new Map(), // "s1:2:6" → [{maxDelay, band, bound, over}]
  refreshing: false,
};

const $ = (selector) => document.querySelector(selector);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// ---- formatting ------------------------------------------------------------------------------

function rate(bytesPerSecond) {
  const bits = bytesPerSecond * 8;
  if (bits >= 1e9) return `${(bits / 1e9).toFixed(2)} Gbit/s`;
  if (bits >= 1e6) return `${(bits / 1e6).toFixed(2)} Mbit/s`;
  if (bits >= 1e3) return `${(bits / 1e3).toFixed(1)} kbit/s`;
  return `${bits.toFixed(0)} bit/s`;
}
const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const micros = (us) => (us === null || us === undefined ? "–" : `${num(us)} µs`);
const unit = (u) => (u === "us" ? "µs" : u);
const when = (unix) => new Date(unix * 1000).toLocaleTimeString();

// ---- talking to the controller ---------------------------------------------------------------

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

async function getJSON(path) {
  const reply = await fetch(path, { headers: { accept: "application/json" } });
  if (!reply.ok) throw new Error(`${path}: HTTP ${reply.status}`);
  return reply.json();
}

async function write(method, path, body) {
  const headers = { accept: "application/json" };
  if (token()) headers.authorization = `Bearer ${token()}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const reply = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await reply.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = { error: text };
  }
  return { status: reply.status, body: parsed };
}

function showStreamState(text) {
  $("#stream-state").textContent = text;
}

async function refresh() {
  if (state.refreshing) return;
  state.refreshing = true;
  try {
    const [status, reservations] = await Promise.all([getJSON("/status/switches"), getJSON("/reservations")]);
    state.status = status;
    state.reservations = reservations;
    renderPorts();
    renderReservations();
  } catch (error) {
    showStreamState(`refresh failed: ${error.message}`);
  } finally {
    state.refreshing = false;
  }
}

// ---- topology --------------------------------------------------------------------------------

function alarmedPorts() {
  const ports = new Set();
  for (const event of state.events.values()) {
    if (event.active && event.cause === "network" && event.port !== null) ports.add(`${event.switch}:${event.port}`);
  }
  return ports;
}

function renderTopology() {
  const root = $("#topology");
  root.replaceChildren();
  const switches = state.topology.switches;
  const width = Math.max(640, 220 * switches.length);
  root.setAttribute("viewBox", `0 0 ${width} 260`);
  const alarmed = alarmedPorts();
  // A trunk the link watch finds dead is drawn dashed (the monitor's snapshot names them).
  const down = new Set(((state.monitor && state.monitor.trunks_down) || []).map((t) => t.split("-").sort().join("-")));
  const xOf = new Map(switches.map((s, i) => [s.name, ((i + 0.5) * width) / switches.length]));
  const ySwitch = 80;
  const links = svg("g");
  const nodes = svg("g");
  root.append(links, nodes);
  const drawn = new Set();
  for (const s of switches) {
    for (const p of s.ports) {
      if (!p.peer.includes(":")) continue;
      const [peer, peerPort] = p.peer.split(":");
      const key = [`${s.name}:${p.port}`, p.peer].sort().join("-");
      if (drawn.has(key) || !xOf.has(peer)) continue;
      drawn.add(key);
      const x1 = xOf.get(s.name);
      const x2 = xOf.get(peer);
      const bad = alarmed.has(`${s.name}:${p.port}`) || alarmed.has(p.peer);
      const look = down.has(key) ? "down" : bad ? "alarm" : "";
      const apart = Math.abs(x2 - x1) > width / switches.length + 1;
      // Neighbours in the row are joined straight; a trunk that skips switches (a ring's last
      // one) arcs above them.
      const link = apart
        ? svg("path", { d: `M ${x1} ${ySwitch - 22} Q ${(x1 + x2) / 2} ${ySwitch - 95} ${x2} ${ySwitch - 22}`, class: look, "data-link": key })
        : svg("line", { x1, y1: ySwitch, x2, y2: ySwitch, class: look, "data-link": key });
      if (down.has(key)) link.append(svg("title", {}, `trunk ${key} is down`));
      links.append(link);
      const dx = Math.sign(x2 - x1) * 62;
      links.append(svg("text", { x: x1 + dx, y: ySwitch - 8, class: "port", "text-anchor": "middle" }, `:${p.port}`));
      links.append(svg("text", { x: x2 - dx, y: ySwitch - 8, class: "port", "text-anchor": "middle" }, `:${peerPort}`));
    }
  }
  for (const s of switches) {
    const x = xOf.get(s.name);
    const hosts = s.ports.filter((p) => !p.peer.includes(":"));
    hosts.forEach((p, i) => {
      const hx = x + (i - (hosts.length - 1) / 2) * Math.min(90, width / switches.length / Math.max(1, hosts.length));
      const hy = 210;
      const host = state.topology.hosts.find((h) => h.name === p.peer);
      const bad = alarmed.has(`${s.name}:${p.port}`);
      links.append(svg("line", { x1: x, y1: ySwitch + 22, x2: hx, y2: hy - 14, class: bad ? "alarm" : "" }));
      links.append(svg("text", { x: (x + hx) / 2 + 4, y: (ySwitch + 22 + hy - 14) / 2, class: "port" }, `:${p.port}`));
      const g = svg("g", { class: "host", "data-host": p.peer });
      g.append(svg("circle", { cx: hx, cy: hy, r: 13 }));
      g.append(svg("text", { x: hx, y: hy + 4, "text-anchor": "middle" }, p.peer));
      if (host) g.append(svg("text", { x: hx, y: hy + 28, "text-anchor": "middle", class: "port" }, host.ip));
      nodes.append(g);
    });
    const bad = s.ports.some((p) => alarmed.has(`${s.name}:${p.port}`));
    const g = svg("g", { class: bad ? "switch alarm" : "switch", "data-switch": s.name });
    g.append(svg("rect", { x: x - 48, y: ySwitch - 22, width: 96, height: 44, rx: 8 }));
    g.append(svg("text", { x, y: ySwitch + 4, "text-anchor": "middle" }, s.name));
    nodes.append(g);
  }
}

// ---- ports: allocation bars and delay sparklines --------------------------------------------

function renderLegend() {
  const legend = $("#legend");
  legend.replaceChildren(
    ...LEVELS.map((l) => el("span", {}, el("i", { style: `background: var(--l${l})` }), `level ${l}`)),
    el("span", {}, el("i", { style: "background: var(--fg); width: 2px" }), "reservable"),
    el("span", {}, el("i", { style: "background: var(--network); height: 2px" }), "delay bound"),
  );
}

function peerOf(switchName, port) {
  const s = state.topology.switches.find((x) => x.name === switchName);
  const p = s && s.ports.find((x) => x.port === port);
  return p ? p.peer : "?";
}

function monitorQueue(switchName, port, priority) {
  const queues = (state.monitor && state.monitor.queues) || [];
  return queues.find((q) => q.switch === switchName && q.port === port && q.priority === priority);
}

function renderPorts() {
  const root = $("#ports");
  const alarmed = alarmedPorts();
  const cards = [];
  for (const sw of state.status) {
    for (const port of sw.ports) {
      const id = `${sw.switch}:${port.port}`;
      const bar = el("div", { class: "bar", title: `${rate(port.allocated_rate)} of ${rate(port.line_rate)}` });
      let left = 0;
      for (const q of port.queues) {
        if (!LEVELS.includes(q.priority) || !q.allocated_rate) continue;
        const width = (100 * q.allocated_rate) / port.line_rate;
        bar.append(el("span", { style: `left:${left}%;width:${width}%;background:var(--l${q.priority})`, "data-level": q.priority }));
        left += width;
      }
      bar.append(el("span", { class: "reservable", style: `left:${(100 * port.reservable_rate) / port.line_rate}%` }));
      const rows = port.queues
        .filter((q) => LEVELS.includes(q.priority) && q.channels > 0)
        .map((q) => queueRow(sw.switch, port.port, q));
      cards.push(
        el(
          "div",
          { class: alarmed.has(id) ? "port alarm" : "port", "data-port": id, "data-allocated": port.allocated_rate },
          el("h3", { text: `${id} → ${peerOf(sw.switch, port.port)} · ${rate(port.line_rate)}` }),
          bar,
          el("div", {
            class: "figures",
            text: `allocated ${rate(port.allocated_rate)} of ${rate(port.reservable_rate)} reservable · ${port.channels} channel(s)`,
          }),
          ...rows,
        ),
      );
    }
  }
  root.replaceChildren(...cards);
}

function queueRow(switchName, port, q) {
  const key = `${switchName}:${port}:${q.priority}`;
  const seen = monitorQueue(switchName, port, q.priority);
  const history = state.history.get(key) || [];
  const bound = seen ? seen.bound_us : q.worst_case_delay_us;
  const last = history.length ? history[history.length - 1] : null;
  const over = seen ? seen.over_bound : 0;
  let figure = "idle";
  if (last && last.packets) figure = last.maxDelay !== null ? `max ${micros(last.maxDelay)}` : `worst band: ${last.band}`;
  const row = el(
    "div",
    { class: over ? "queue alarm" : "queue", "data-queue": key },
    el("span", { class: "label", text: `level ${q.priority}` }),
    sparkline(history, bound),
  );
  row.append(
    el("span", {}),
    el("span", {
      class: "figures",
      text: `${figure} · bound ${micros(bound)} · Σσ ${num(q.allocated_burst)} B${over ? ` · ${over} packets over` : ""}`,
    }),
  );
  return row;
}

// Without registers (p4lang's PI reads none), the delay is known only as the band it fell in.
const BAND_FRACTION = { quarter: 0.25, half: 0.5, within: 1, over: 1.25 };

function sparkline(history, bound) {
  const width = 300;
  const height = 44;
  const values = history.map((h) => (h.maxDelay !== null ? h.maxDelay : h.band ? BAND_FRACTION[h.band] * h.bound : 0));
  const top = Math.max(bound * 1.4, ...values, 1);
  const y = (v) => height - 3 - (v / top) * (height - 6);
  const x = (i) => (i * width) / Math.max(HISTORY - 1, 1);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
  root.append(svg("line", { x1: 0, x2: width, y1: y(bound), y2: y(bound), class: "bound" }));
  if (values.length) {
    const offset = HISTORY - values.length;
    const points = values.map((v, i) => `${x(i + offset).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    root.append(svg("polyline", { points, class: "series" }));
    history.forEach((h, i) => {
      if (h.over) root.append(svg("circle", { cx: x(i + offset), cy: y(values[i]), r: 2.5, class: "over" }));
    });
  }
  return root;
}

// ---- reservations ---------------------------------------------------------------------------

function delivered(id) {
  const channels = (state.monitor && state.monitor.channels) || [];
  const first = channels.find((c) => c.reservation_id === id && c.first_hop);
  return first ? rate(first.delivered_rate) : "–";
}

function renderReservations() {
  const filter = $("#reservation-filter").value.trim().toLowerCase();
  const rows = [];
  for (const r of state.reservations) {
    const selector =
      r.protocol === 36 ? `xtp key ${r.flow_key}` : `${r.protocol === 6 ? "tcp" : "udp"} ${r.src_port} → ${r.dst_port}`;
    const path = r.allocation.hops.map((h) => `${h.switch}:${h.port}`).join(" → ");
    const text = [r.id, r.src, r.dst, selector, `p${r.priority}`, path, r.state, r.initiator].join(" ").toLowerCase();
    if (filter && !text.includes(filter)) continue;
    rows.push(
      el(
        "tr",
        { "data-id": r.id, class: r.state === "down" ? "down" : "", title: r.note || "" },
        el("td", { text: r.id }),
        el("td", { text: `${r.src} → ${r.dst}` }),
        el("td", { text: selector }),
        el("td", { text: r.priority }),
        el("td", { class: "num", text: rate(r.allocation.rate) }),
        el("td", { class: "num", text: `${num(r.allocation.burst)} B` }),
        el("td", { class: "num", text: micros(r.allocation.protected_delay_us ?? r.allocation.worst_case_delay_us) }),
        el("td", { text: path }),
        el("td", { class: "num", text: delivered(r.id) }),
        el("td", { text: r.state }),
        el("td", {}, el("button", { class: "delete", "data-id": r.id, onclick: () => remove(r) }, "Delete")),
      ),
    );
  }
  $("#reservations tbody").replaceChildren(...rows);
  $("#reservation-count").textContent = `${rows.length} of ${state.reservations.length}`;
}

function message(node, kind, ...content) {
  node.className = `message ${kind}`;
  node.replaceChildren(...content);
  node.hidden = false;
}

async function remove(r) {
  const out = $("#reservation-message");
  const refusal = cannotChange("delete reservations");
  if (refusal) {
    message(out, "error", refusal);
    return;
  }
  if (!window.confirm(`Delete reservation ${r.id} (${r.src} → ${r.dst}, ${rate(r.allocation.rate)})?`)) return;
  const reply = await write("DELETE", `/reservations/${r.id}`);
  if (reply.status === 204) message(out, "ok", `Reservation ${r.id} deleted; its capacity is free again.`);
  else message(out, "error", `Delete failed (HTTP ${reply.status}): ${describeError(reply.body)}`);
  await refresh();
}

function describeError(body) {
  if (!body) return "no detail";
  if (body.message) return body.message;
  if (Array.isArray(body.detail)) return body.detail.map((d) => `${d.field}: ${d.message}`).join("; ");
  return body.error || JSON.stringify(body);
}

// ---- the reservation form -------------------------------------------------------------------

function fillHosts() {
  const form = $("#reservation-form");
  const hosts = state.topology.hosts;
  for (const [name, pick] of [["src", 0], ["dst", hosts.length - 1]]) {
    const select = form.elements[name];
    select.replaceChildren(...hosts.map((h) => el("option", { value: h.ip, text: `${h.name} ${h.ip}` })));
    if (hosts.length) select.value = hosts[Math.max(0, pick)].ip;
  }
}

async function reserve(event) {
  event.preventDefault();
  const form = event.target;
  const out = $("#form-result");
  const f = form.elements;
  const body = {
    src: f.src.value,
    dst: f.dst.value,
    protocol: f.protocol.value,
    priority: Number(f.priority.value),
    rate: Number(f.rate.value),
    burst: Number(f.burst.value),
    max_packet: Number(f.max_packet.value),
    delay_bound_us: Number(f.delay_bound_us.value || 0),
  };
  if (body.protocol === "xtp") body.xtp_key = Number(f.xtp_key.value || 0);
  else Object.assign(body, { src_port: Number(f.src_port.value), dst_port: Number(f.dst_port.value) });
  const refusal = cannotChange("make reservations");
  if (refusal) {
    message(out, "error", refusal);
    return;
  }
  const reply = await write("POST", "/reservations", body);
  if (reply.status === 201) {
    const a = reply.body.allocation;
    message(
      out,
      "ok",
      `Admitted as reservation ${reply.body.id}: ${rate(a.rate)}, σ ${num(a.burst)} B, ` +
        `worst case ${micros(a.worst_case_delay_us)} over ${a.hops.length} hop(s).`,
    );
  } else if (reply.status === 409 && reply.body && reply.body.violations) {
    const list = el(
      "ul",
      {},
      ...reply.body.violations.map((v) =>
        el("li", {
          text:
            `${v.constraint}${v.switch ? ` at ${v.switch}:${v.port}` : ""}${v.priority !== null ? ` level ${v.priority}` : ""}: ` +
            `${num(v.would_be)} ${v.unit} against ${num(v.limit)} (by ${num(v.excess)} ${v.unit}) — ${v.detail}`,
        }),
      ),
    );
    message(out, "error", el("strong", { text: "Denied: " }), reply.body.message, list);
  } else if (reply.status === 401) {
    message(out, "error", `The token was refused (${describeError(reply.body)}): enter the operator's token (top right).`);
  } else {
    message(out, "error", `Not admitted (HTTP ${reply.status}): ${describeError(reply.body)}`);
  }
  await refresh();
}

// ---- monitor and events ---------------------------------------------------------------------

const VERDICT_TEXT = {
  ok: "guarantees hold",
  source: "a source exceeds its envelope",
  network: "PROMISE BROKEN",
};

function onMonitor(snapshot) {
  state.monitor = snapshot;
  for (const q of snapshot.queues) {
    const key = `${q.switch}:${q.port}:${q.priority}`;
    const list = state.history.get(key) || [];
    list.push({
      maxDelay: q.max_delay_us,
      band: q.worst_band,
      bound: q.bound_us,
      over: q.over_bound > 0,
      packets: q.packets,
    });
    if (list.length > HISTORY) list.shift();
    state.history.set(key, list);
  }
  for (const e of snapshot.active) state.events.set(e.id, e);
  const verdict = snapshot.enabled ? snapshot.verdict : "unknown";
  const badge = $("#verdict");
  badge.dataset.verdict = verdict;
  badge.textContent = snapshot.enabled ? VERDICT_TEXT[verdict] : "monitor off";
  const v = snapshot.violations;
  $("#poll-info").textContent =
    `poll ${snapshot.polls} every ${snapshot.interval_s} s · ${v.network} network, ${v.source} source violation(s) since start`;
  renderAlarm();
  renderEvents();
  renderTopology();
  refresh();
}

function onEvent(event) {
  state.events.set(event.id, event);
  renderAlarm();
  renderEvents();
  renderTopology();
}

function renderAlarm() {
  const banner = $("#alarm");
  const active = [...state.events.values()].filter((e) => e.active && e.cause === "network").sort((a, b) => b.id - a.id);
  if (!active.length) {
    banner.hidden = true;
    return;
  }
  banner.textContent = `A promise is being broken (${active.length} network violation(s)): ${active[0].message}`;
  banner.hidden = false;
}

function renderEvents() {
  const cause = $("#event-filter").value;
  const events = [...state.events.values()].sort((a, b) => b.id - a.id).filter((e) => !cause || e.cause === cause);
  $("#events").replaceChildren(
    ...events.slice(0, 200).map((e) =>
      el(
        "li",
        { class: `${e.cause}${e.active ? " active" : ""}`, "data-event": e.id, "data-kind": e.kind },
        el("span", { class: "tag", text: e.cause === "network" ? "network violation" : "source" }),
        el("span", { class: "muted", text: `${when(e.raised_at)}${e.active ? " (ongoing)" : ` – ${when(e.cleared_at)}`} ` }),
        e.message,
        el("span", {
          class: "muted",
          text: ` · ${num(e.packets)} packets over ${e.polls} poll(s)${e.figure !== null ? `; worst ${num(e.figure)} ${unit(e.unit)}` : ""}`,
        }),
      ),
    ),
  );
  $("#events-empty").hidden = events.length > 0;
}

function connect() {
  const stream = new EventSource("/events/stream");
  stream.addEventListener("open", () => showStreamState("live"));
  stream.addEventListener("monitor", (e) => onMonitor(JSON.parse(e.data)));
  stream.addEventListener("event", (e) => onEvent(JSON.parse(e.data)));
  stream.addEventListener("error", () => showStreamState("live stream lost; reconnecting…"));
}

// ---- the token ------------------------------------------------------------------------------

// The role the token gives, as the controller says (GET /role): "operator" may change, "viewer"
// may only look; null without a token; "refused" for a token that is nobody's.
let role = null;

async function renderToken() {
  const has = Boolean(token());
  $("#token-forget").hidden = !has;
  role = null;
  if (has) {
    const reply = await fetch("/role", { headers: { accept: "application/json", authorization: `Bearer ${token()}` } });
    role = reply.ok ? (await reply.json()).role : "refused";
  }
  $("#token-state").textContent = {
    operator: "operator: changes enabled",
    viewer: "viewer: read-only (changes need the operator's token)",
    refused: "token refused: read-only",
  }[role] || "read-only";
}

// Why this page may not change anything now, or null when it may.
function cannotChange(what) {
  if (!token()) return `Enter the operator's token (top right) to ${what}.`;
  if (role === "viewer") return `The token entered is the viewer's, which may only look: enter the operator's to ${what}.`;
  return null;
}

function setupToken() {
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("#token-input").value.trim();
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    $("#token-input").value = "";
    renderToken().catch(() => {});
  });
  $("#token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    renderToken().catch(() => {});
  });
  renderToken().catch(() => {});
}

// ---- start ----------------------------------------------------------------------------------

async function start() {
  setupToken();
  renderLegend();
  $("#reservation-form").addEventListener("submit", (e) => reserve(e).catch((err) => message($("#form-result"), "error", err.message)));
  $("#reservation-filter").addEventListener("input", renderReservations);
  $("#event-filter").addEventListener("change", renderEvents);
  try {
    state.topology = await getJSON("/topology");
    for (const e of await getJSON("/events?limit=100")) state.events.set(e.id, e);
  } catch (error) {
    showStreamState(`cannot read the controller: ${error.message}`);
  }
  fillHosts();
  renderTopology();
  renderEvents();
  await refresh();
  connect();
}

start();
