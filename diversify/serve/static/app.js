// The page of `diversify serve`: every view is one URL (#/, #/cluster/ID, #/search?q=..., #/near?text=...).
// Every value from the server enters the page as text (textContent), never as markup.
"use strict";

(function () {
  const view = document.getElementById("view");
  let summary = null;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = String(v);
      else node.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n));
  const sim = (s) => (s === null || s === undefined ? "—" : s.toFixed(3));
  const idText = (x) => (typeof x === "string" ? x : String(x));
  const clusterLink = (c, label) => el("a", { href: "#/cluster/" + encodeURIComponent(c), "data-cluster": c }, label === undefined ? String(c) : label);
  const stages = (names) => el("span", { class: "stages" }, ...(names || []).map((n) => el("span", { class: "stage", text: n })));

  async function api(path, options) {
    const r = await fetch(path, Object.assign({ headers: { Accept: "application/json" } }, options || {}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      const msg = body && body.error ? body.error.message : "the server answered " + r.status;
      throw new Error(msg);
    }
    return body;
  }

  function show(...nodes) {
    view.replaceChildren(...nodes);
    document.body.dataset.ready = "1";
  }

  function fail(err) {
    show(el("p", { class: "error", id: "error", text: String(err && err.message ? err.message : err) }));
  }

  function setStats(s) {
    const parts = [];
    if (s.documents !== undefined) parts.push(fmt(s.documents) + " documents", fmt(s.clusters) + " clusters", fmt(s.folded) + " folded");
    if (s.source) parts.push(s.source === "index" ? "live index" : "artifact");
    if (s.corpus && s.corpus.documents !== undefined) parts.push("corpus: " + fmt(s.corpus.documents) + " texts");
    document.getElementById("stats").textContent = parts.join(" · ");
  }

  async function getSummary() {
    summary = await api("/page/api/summary?top=20");
    setStats(summary);
    return summary;
  }

  // ------------------------------------------------------------------ home

  function histogram(rows) {
    // bar lengths on a log scale: the clusters of one document outnumber the large ones by far
    const max = Math.log1p(Math.max(1, ...rows.map((r) => r.clusters)));
    return el("div", { id: "histogram" }, ...rows.map((r) => el("div", { class: "hist-row", "data-lo": r.lo, "data-hi": r.hi },
      el("span", { class: "hist-label", text: r.lo === r.hi ? "size " + r.lo : "size " + r.lo + "–" + r.hi }),
      el("div", { class: "hist-bar", style: null, "data-width": (100 * Math.log1p(r.clusters) / max).toFixed(1) }),
      el("span", { class: "hist-count", text: fmt(r.clusters) }))));
  }

  function widthBars(root) {
    // widths set through the CSSOM (an inline style attribute would need 'unsafe-inline' in the CSP)
    for (const bar of root.querySelectorAll(".hist-bar")) bar.style.width = bar.dataset.width + "%";
  }

  function largestTable(rows) {
    const hasText = rows.some((r) => r.text !== undefined);
    return el("table", { id: "largest" },
      el("thead", {}, el("tr", {}, el("th", { class: "num", text: "#" }), el("th", { text: "cluster" }), el("th", { class: "num", text: "size" }),
        el("th", { text: "representative" }), el("th", { text: "stages" }))),
      el("tbody", {}, ...rows.map((r, i) => el("tr", { "data-cluster": r.cluster_id, "data-size": r.size },
        el("td", { class: "num", text: i + 1 }), el("td", {}, clusterLink(r.cluster_id)), el("td", { class: "num", text: fmt(r.size) }),
        el("td", {}, el("span", { class: "id", text: idText(r.representative) }), hasText && r.text !== null && r.text !== undefined ? el("span", { class: "snippet", text: r.text }) : null),
        el("td", {}, stages(r.stages))))));
  }

  function nearBox() {
    const area = el("textarea", { id: "near-text", placeholder: "paste a document to see its near-duplicates in the index", maxlength: 200000 });
    const form = el("form", { class: "near box", id: "near-form" }, el("h2", { text: "Near-duplicates of a document" }), area, el("button", { type: "submit", text: "Find near-duplicates" }));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      location.hash = "#/near?text=" + encodeURIComponent(area.value);
    });
    return form;
  }

  async function home() {
    const s = await getSummary();
    if (!s.source) return show(el("p", { class: "muted", text: "Nothing is being served yet." }));
    const left = el("div", { class: "box" }, el("h2", { text: "Cluster sizes" }),
      s.histogram.length ? histogram(s.histogram) : el("p", { class: "muted", text: "no clusters" }),
      el("p", { class: "legend", text: "clusters by size; bars on a log scale" }),
      s.partial ? el("p", { class: "muted", text: "counted over the first " + fmt(s.counted) + " documents of the index" }) : null);
    const right = el("div", { class: "box" }, el("h2", { text: "Largest clusters" }),
      s.largest.length ? largestTable(s.largest) : el("p", { class: "muted", text: "no clusters" }));
    const notes = [];
    if (s.corpus && s.corpus.error) notes.push(el("p", { class: "error", id: "corpus-error", text: s.corpus.error }));
    const root = el("section", { "data-view": "home" }, ...notes, el("div", { class: "panels" }, left, right), s.has_index ? nearBox() : null);
    widthBars(root);
    show(root);
  }

  // ------------------------------------------------------------------ one cluster

  function diffText(ops) {
    return ops.map(([op, text]) => op === "+" ? el("ins", { class: "diff-add", text }) : op === "-" ? el("del", { class: "diff-del", text }) : document.createTextNode(text));
  }

  function card(m, shownLabel) {
    const head = el("div", { class: "card-head" }, el("span", { class: "id", text: idText(m.id) }),
      m.is_representative ? el("span", { class: "badge", text: shownLabel }) : null, stages(m.stages),
      m.is_representative ? null : el("span", { class: "sim", title: "verified similarity to the shown document", text: sim(m.similarity) }));
    let body;
    if (m.text === undefined || m.text === null) body = el("div", { class: "text muted", text: m.text === null ? "(not in the corpus file)" : "(no corpus file: pass --corpus to see texts)" });
    else body = el("div", { class: "text" }, ...(m.diff ? diffText(m.diff.ops) : [m.text]));
    const notes = [];
    if (m.text_cut) notes.push("text cut to " + fmt(summary ? summary.limits.text_chars : 0) + " characters");
    if (m.diff && m.diff.cut) notes.push("words compared up to " + fmt(summary ? summary.limits.diff_words : 0));
    if (m.diff && m.diff.coarse) notes.push("too many changes to mark word by word: the differing middle is marked whole");
    return el("article", { class: "card member" + (m.is_representative ? " shown" : ""), "data-id": idText(m.id), "data-similarity": m.similarity },
      head, body, notes.length ? el("div", { class: "legend", text: notes.join("; ") }) : null);
  }

  async function cluster(id, params) {
    if (!summary) await getSummary();
    const limit = params.get("limit");
    const c = await api("/page/api/cluster/" + encodeURIComponent(id) + (limit ? "?limit=" + encodeURIComponent(limit) : ""));
    const head = el("div", {}, el("h2", {}, "Cluster ", el("span", { class: "id", id: "cluster-id", text: c.cluster_id }), " · ", fmt(c.size), c.size === 1 ? " document" : " documents"),
      c.asked_cluster_id !== undefined ? el("p", { class: "muted", text: "cluster " + c.asked_cluster_id + " was merged into this one" }) : null,
      el("p", { class: "legend" }, "The representative (shown) first; each member with its verified similarity to it and the stage that joined it. ",
        el("ins", { class: "diff-add", text: "added" }), " words are only in the member, ", el("del", { class: "diff-del", text: "struck" }), " ones only in the shown document.",
        c.similarity_stored ? null : " This artifact stores no similarity."));
    const more = c.more > 0 ? el("p", { class: "more" }, fmt(c.more) + " more members not shown. ",
      el("a", { href: "#/cluster/" + c.cluster_id + "?limit=" + (summary ? summary.limits.members : 50), text: "show up to " + (summary ? summary.limits.members : 50) })) : null;
    const notes = c.corpus_error ? el("p", { class: "error", id: "corpus-error", text: c.corpus_error }) : null;
    show(el("section", { "data-view": "cluster", "data-cluster": c.cluster_id }, head, notes, el("div", { class: "cards", id: "members" }, ...c.members.map((m) => card(m, "representative, shown"))), more));
  }

  // ------------------------------------------------------------------ search

  async function search(params) {
    if (!summary) await getSummary();
    const q = params.get("q") || "";
    const start = params.get("start") || "0";
    const texts = params.get("texts") === "1" ? "1" : "0";
    document.getElementById("q").value = q;
    const r = await api("/page/api/search?q=" + encodeURIComponent(q) + "&start=" + encodeURIComponent(start) + "&texts=" + texts);
    const parts = [el("h2", {}, "Search: ", el("span", { class: "id", text: q }))];
    if (r.id_match) parts.push(el("p", { id: "id-match" }, "Document ", el("span", { class: "id", text: idText(r.id_match.id) }), " is in cluster ", clusterLink(r.id_match.cluster_id), "."));
    else if (start === "0") parts.push(el("p", { class: "muted", id: "no-id-match", text: "No document has this id." }));
    if (r.corpus_error) parts.push(el("p", { class: "error", id: "corpus-error", text: r.corpus_error }));
    if (r.text) {
      const t = r.text;
      parts.push(el("p", { class: "muted", text: "Text matches in records " + fmt(t.start) + "–" + fmt(t.start + t.scanned) + " of " + fmt(t.documents) + " (a search reads at most " + fmt(summary.limits.scan_docs) + " documents)." }));
      parts.push(el("table", { id: "text-hits" }, el("thead", {}, el("tr", {}, el("th", { text: "document" }), el("th", { text: "cluster" }), el("th", { text: "text" }))),
        el("tbody", {}, ...t.hits.map((h) => el("tr", { "data-id": idText(h.id) }, el("td", {}, el("span", { class: "id", text: idText(h.id) })),
          el("td", {}, h.cluster_id === null ? "—" : clusterLink(h.cluster_id)), el("td", { text: h.snippet }))))));
      if (t.next !== null) parts.push(el("p", { class: "more" }, el("a", { id: "scan-more", href: "#/search?q=" + encodeURIComponent(q) + "&texts=1&start=" + t.next, text: "search on from record " + fmt(t.next) })));
    } else if (r.texts_skipped) {
      parts.push(el("p", { class: "more" }, el("a", { id: "search-texts", href: "#/search?q=" + encodeURIComponent(q) + "&texts=1", text: "look for it in the texts too" })));
    } else if (!r.corpus_error) parts.push(el("p", { class: "muted", text: "Text search needs the corpus file (diversify serve --corpus PATH)." }));
    show(el("section", { "data-view": "search" }, ...parts));
  }

  // ------------------------------------------------------------------ near-duplicates of a pasted document

  async function near(params) {
    if (!summary) await getSummary();
    const text = params.get("text") || "";
    const r = await api("/page/api/near", { method: "POST", body: text, headers: { "Content-Type": "text/plain; charset=utf-8", Accept: "application/json" } });
    const pasted = { id: "(pasted)", is_representative: true, stages: [], text, similarity: null };
    const cards = [card(pasted, "pasted"), ...r.near.map((m) => card(Object.assign({ is_representative: false, stages: [] }, m), ""))];
    const head = el("h2", {}, r.near.length ? "Near-duplicates in the index: " + r.near.length : "No near-duplicate in the index");
    const box = nearBox();
    box.querySelector("textarea").value = text;
    show(el("section", { "data-view": "near" }, head,
      r.cluster_id !== null && r.cluster_id !== undefined ? el("p", {}, "It would fold into cluster ", clusterLink(r.cluster_id), ".") : null,
      r.corpus_error ? el("p", { class: "error", id: "corpus-error", text: r.corpus_error }) : null,
      el("div", { class: "cards", id: "near" }, ...cards), box));
  }

  // ------------------------------------------------------------------ routing

  function route() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, query] = hash.split("?", 2);
    const params = new URLSearchParams(query || "");
    document.body.dataset.ready = "0";
    let m;
    let run;
    if ((m = path.match(/^\/cluster\/([^/]+)$/))) run = cluster(decodeURIComponent(m[1]), params);
    else if (path === "/search") run = search(params);
    else if (path === "/near") run = near(params);
    else run = home();
    run.catch(fail);
  }

  document.getElementById("search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = document.getElementById("q").value.trim();
    if (q) location.hash = "#/search?q=" + encodeURIComponent(q);
  });
  window.addEventListener("hashchange", route);
  // /?q=ID opens the search for it
  const q = new URLSearchParams(location.search).get("q");
  if (q && !location.hash) location.hash = "#/search?q=" + encodeURIComponent(q);
  else route();
})();
