import HostControl

/// `GET /`: the live dashboard, one self-contained page (inline style and script, no fetch but
/// this server's own `/api/status` and `/api/live`), readable with 16 windows.
///
/// Every string from the host goes into the page as text (`textContent`), never as markup: a
/// set-aside reason can hold a file name anyone could choose.
///
/// No list on the page grows with the host's age: each is cut to one of the limits below.
enum DashboardPage {
    /// Events the page keeps for its chart's marks: as many as the host holds.
    static let eventsKept = HostObservation.eventCapacity
    /// Lines of the event log shown, newest first.
    static let eventLinesShown = 200
    /// Latency points the page keeps: as many as the live feed's history.
    static let pointsKept = LiveFeed.historyCapacity
    /// The newest points drawn as dots on the p99 line.
    static let pointsDotted = 120
    /// Set-aside entries shown as rows; `ctl set-aside` lists them all.
    static let setAsideRowsShown = 64

    static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>windowhost</title>
        <style>
        :root { --bg:#0f1419; --card:#1a2129; --line:#2c3640; --text:#d8dee4; --dim:#8b96a1; --ok:#3fb950; --warn:#d29922; --bad:#f85149; --p50:#58a6ff; --p99:#bc8cff; }
        * { box-sizing: border-box; }
        body { margin: 0; padding: 16px 20px; background: var(--bg); color: var(--text); font: 13px/1.4 system-ui, sans-serif; }
        header { display: flex; gap: 24px; align-items: baseline; flex-wrap: wrap; }
        h1 { font-size: 18px; margin: 0; }
        .dim { color: var(--dim); }
        .mono { font-family: ui-monospace, monospace; }
        #chart-box { margin: 14px 0; background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
        #chart { width: 100%; height: 220px; display: block; }
        .legend span { margin-right: 14px; }
        .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; vertical-align: middle; }
        #cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 10px; }
        .card { background: var(--card); border: 1px solid var(--line); border-left: 4px solid var(--dim); border-radius: 6px; padding: 8px 10px; }
        .card.foreground, .card.background { border-left-color: var(--ok); }
        .card.starting, .card.reserved, .card.disconnecting { border-left-color: var(--warn); }
        .card.crashed, .card.set_aside { border-left-color: var(--bad); }
        .card.flash { outline: 2px solid var(--bad); }
        .card .uuid { font-family: ui-monospace, monospace; font-size: 11.5px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .card dl { display: grid; grid-template-columns: auto 1fr auto 1fr; gap: 1px 10px; margin: 6px 0 0; }
        .card dt { color: var(--dim); }
        .card dd { margin: 0; font-family: ui-monospace, monospace; text-align: right; white-space: nowrap; }
        .state { font-weight: 600; }
        #events { margin-top: 14px; max-height: 200px; overflow: auto; font-family: ui-monospace, monospace; font-size: 12px; }
        #events div.kill, #events div.crash, #events div.watchdog { color: var(--bad); }
        #events div.recovered { color: var(--ok); }
        #aside { margin-top: 14px; }
        #aside table { border-collapse: collapse; font-size: 12px; margin-top: 4px; }
        #aside th { color: var(--dim); font-weight: normal; text-align: left; }
        #aside th, #aside td { padding: 2px 12px 2px 0; }
        </style>
        </head>
        <body>
        <header>
          <h1>windowhost</h1>
          <span id="summary" class="dim">connecting…</span>
          <span id="link" class="dim"></span>
        </header>
        <div id="chart-box">
          <div class="legend dim">
            <span><i class="swatch" style="background:var(--p50)"></i>save p50</span>
            <span><i class="swatch" style="background:var(--p99)"></i>save p99</span>
            <span><i class="swatch" style="background:var(--bad)"></i>worker killed or died</span>
            <span><i class="swatch" style="background:var(--ok)"></i>recovered</span>
            <span>(ms, request to durable; last 10 minutes)</span>
          </div>
          <svg id="chart" viewBox="0 0 1000 220" preserveAspectRatio="none" data-points="0" data-marks="0" role="img" aria-label="save latency"></svg>
        </div>
        <div id="cards"></div>
        <div id="moves"></div>
        <div id="aside"></div>
        <div id="events"></div>
        <script>
        "use strict";
        const svgNS = "http://www.w3.org/2000/svg";
        const points = [];
        const events = [];
        const known = new Map();
        let restartsSeen = new Map();
        let latency = {};

        function el(tag, cls, text) {
          const node = document.createElement(tag);
          if (cls) node.className = cls;
          if (text !== undefined) node.textContent = String(text);
          return node;
        }

        function card(w) {
          let node = known.get(w.uuid);
          if (!node) {
            node = el("div", "card");
            node.id = "window-" + w.uuid;
            node.dataset.uuid = w.uuid;
            node.appendChild(el("div", "uuid"));
            node.appendChild(el("div", "state"));
            node.appendChild(document.createElement("dl"));
            document.getElementById("cards").appendChild(node);
            known.set(w.uuid, node);
          }
          node.className = "card " + w.state;
          const uuid = node.querySelector(".uuid");
          uuid.textContent = w.uuid;
          uuid.title = w.uuid;
          node.querySelector(".state").textContent = w.state + (w.failing ? " · saves failing: " + w.failing.error : "");
          const lat = latency[w.uuid];
          const rows = [
            ["worker pid", w.pid || "—"],
            ["tabs", w.tabs + (w.incognito_tabs ? " (" + w.incognito_tabs + " incognito)" : "")],
            ["durable seq", w.durable_seq + (w.applied_seq > w.durable_seq ? " (+" + (w.applied_seq - w.durable_seq) + ")" : "")],
            ["saves", w.saves + (w.save_failures ? " (" + w.save_failures + " failed)" : "")],
            ["save p99", lat ? lat.p99_ms.toFixed(2) + " ms" : "—"],
            ["restarts", w.restarts],
            ["last recovery", w.last_recovery_ms == null ? "—" : w.last_recovery_ms.toFixed(1) + " ms"],
          ];
          const dl = node.querySelector("dl");
          dl.replaceChildren();
          for (const [k, v] of rows) { dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", v)); }
          if ((restartsSeen.get(w.uuid) ?? w.restarts) < w.restarts) {
            node.classList.add("flash");
            setTimeout(() => node.classList.remove("flash"), 1500);
          }
          restartsSeen.set(w.uuid, w.restarts);
        }

        function renderStatus(status) {
          if (!status) return;
          const open = new Set(status.windows.map(w => w.uuid));
          for (const [uuid, node] of known) if (!open.has(uuid)) { node.remove(); known.delete(uuid); restartsSeen.delete(uuid); }
          for (const w of status.windows) card(w);
          const tabs = status.windows.reduce((n, w) => n + w.tabs, 0);
          document.getElementById("summary").textContent =
            status.windows.length + " windows · " + tabs + " tabs · supervisor pid " + status.supervisor_pid;
          const moves = document.getElementById("moves");
          moves.replaceChildren();
          if ((status.moves || []).length) {
            moves.appendChild(el("div", "dim", "moves between windows under way:"));
            const table = el("table", "mono");
            const head = el("tr");
            for (const name of ["move", "tab", "from", "to", "state", "for"]) head.appendChild(el("th", "", name));
            table.appendChild(head);
            for (const m of status.moves) {
              const row = el("tr", "move");
              row.id = "move-" + m.move;
              const tab = m.new_tab == null ? String(m.tab) : m.tab + " → " + m.new_tab;
              const state = m.state + (m.committed ? " (committed)" : "");
              for (const value of [m.move, tab, m.from, m.to, state, m.ms.toFixed(1) + " ms"]) row.appendChild(el("td", "", value));
              table.appendChild(row);
            }
            moves.appendChild(table);
          }
          const aside = document.getElementById("aside");
          aside.replaceChildren();
          if (status.set_aside.length) {
            aside.appendChild(el("div", "dim", "set aside (windowhost ctl adopt ID brings one back, ctl discard ID deletes it):"));
            const table = el("table", "mono");
            const head = el("tr");
            for (const name of ["id", "window", "reason", "set aside at", "browsers", "tabs", "durable seq", "state"]) head.appendChild(el("th", "", name));
            table.appendChild(head);
            for (const s of status.set_aside.slice(0, \#(setAsideRowsShown))) {
              const row = el("tr", "entry");
              row.id = "aside-" + s.id;
              const held = s.summary === "read" ? [(s.browsers || []).join("+"), s.regular_tabs + "+" + s.incognito_tabs, String(s.durable_seq)]
                : [s.summary, "", ""];
              const state = s.state === "adopting" ? "adopting as " + s.adopting_as : s.state;
              for (const value of [s.id, s.uuid || "-", s.reason, s.at || "-", ...held, state]) row.appendChild(el("td", "", value));
              table.appendChild(row);
            }
            aside.appendChild(table);
            const more = status.set_aside.length - \#(setAsideRowsShown);
            if (more > 0) aside.appendChild(el("div", "dim more", "… and " + more + " more: windowhost ctl set-aside lists them all"));
          }
        }

        function addEvents(list) {
          const log = document.getElementById("events");
          for (const e of list) {
            events.push(e);
            const what = e.kind === "recovered" ? "recovered in " + e.recovery_ms.toFixed(1) + " ms" : "worker " + (e.kind === "kill" ? "killed" : e.kind === "watchdog" ? "killed by the watchdog" : "crashed");
            log.prepend(el("div", e.kind, e.seconds.toFixed(1) + " s  " + e.window + "  " + what));
          }
          while (events.length > \#(eventsKept)) events.shift();
          while (log.childElementCount > \#(eventLinesShown)) log.lastChild.remove();
        }

        function drawChart() {
          const svg = document.getElementById("chart");
          svg.replaceChildren();
          const W = 1000, H = 220, top = 10, bottom = 200;
          const end = points.length ? points[points.length - 1].seconds : 0;
          const start = Math.max(0, end - 600);
          const shown = points.filter(p => p.seconds >= start && p.p99_ms != null);
          const highest = Math.max(1, ...shown.map(p => p.p99_ms));
          const x = s => ((s - start) / Math.max(1, end - start)) * (W - 60) + 50;
          const y = v => bottom - (v / highest) * (bottom - top);
          const line = (x1, y1, x2, y2, stroke, width) => {
            const l = document.createElementNS(svgNS, "line");
            l.setAttribute("x1", x1); l.setAttribute("y1", y1); l.setAttribute("x2", x2); l.setAttribute("y2", y2);
            l.setAttribute("stroke", stroke); l.setAttribute("stroke-width", width);
            svg.appendChild(l);
            return l;
          };
          const text = (tx, ty, s) => {
            const t = document.createElementNS(svgNS, "text");
            t.setAttribute("x", tx); t.setAttribute("y", ty); t.setAttribute("fill", "#8b96a1"); t.setAttribute("font-size", "11");
            t.textContent = s;
            svg.appendChild(t);
          };
          line(50, bottom, W - 10, bottom, "#2c3640", 1);
          text(4, top + 8, highest.toFixed(1) + " ms");
          text(4, bottom, "0");
          let marks = 0;
          for (const e of events) {
            if (e.seconds < start) continue;
            const mark = line(x(e.seconds), top, x(e.seconds), bottom, e.kind === "recovered" ? "#3fb950" : "#f85149", 1.5);
            mark.setAttribute("class", "mark " + e.kind);
            const title = document.createElementNS(svgNS, "title");
            title.textContent = e.window + " " + e.kind;
            mark.appendChild(title);
            marks++;
          }
          for (const [key, color] of [["p50_ms", "#58a6ff"], ["p99_ms", "#bc8cff"]]) {
            const poly = document.createElementNS(svgNS, "polyline");
            poly.setAttribute("fill", "none"); poly.setAttribute("stroke", color); poly.setAttribute("stroke-width", "1.5");
            poly.setAttribute("points", shown.map(p => x(p.seconds).toFixed(1) + "," + y(p[key]).toFixed(1)).join(" "));
            svg.appendChild(poly);
          }
          for (const p of shown.slice(-\#(pointsDotted))) {
            const c = document.createElementNS(svgNS, "circle");
            c.setAttribute("class", "point"); c.setAttribute("cx", x(p.seconds)); c.setAttribute("cy", y(p.p99_ms)); c.setAttribute("r", "2");
            c.setAttribute("fill", "#bc8cff");
            svg.appendChild(c);
          }
          text(W - 60, H - 4, end.toFixed(0) + " s");
          svg.dataset.points = String(shown.length);
          svg.dataset.marks = String(marks);
        }

        function addPoints(list) {
          for (const p of list) points.push(p);
          while (points.length > \#(pointsKept)) points.shift();
        }

        fetch("/api/status").then(r => r.ok ? r.json() : null).then(renderStatus).catch(() => {});
        const live = new EventSource("/api/live");
        live.addEventListener("history", m => {
          const h = JSON.parse(m.data);
          points.length = 0; events.length = 0;
          document.getElementById("events").replaceChildren();
          addPoints(h.points);
          addEvents(h.events);
          if (h.tick) { latency = h.tick.latency; renderStatus(h.tick.status); }
          drawChart();
        });
        live.addEventListener("tick", m => {
          const t = JSON.parse(m.data);
          latency = t.latency;
          addPoints(t.points);
          renderStatus(t.status);
          drawChart();
        });
        live.addEventListener("events", m => { addEvents(JSON.parse(m.data)); drawChart(); });
        live.onerror = () => { document.getElementById("link").textContent = "(reconnecting)"; };
        live.onopen = () => { document.getElementById("link").textContent = "live"; };
        </script>
        </body>
        </html>
        """#
}
