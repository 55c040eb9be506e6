// The overview: a namespace's (or every namespace's) Events over time as
// stacked bars by reason or type, counted by the server (eventrecordcounts,
// through the plugin, with the user's identity), a table of the same
// numbers, and from a segment the objects behind it, each a link to its
// story. A search of the notes (note.contains) narrows the chart and the
// drill-downs to the Events whose notes hold the term and lists their
// objects (versions stored before history kept the note have none, and
// are neither counted nor listed). On a fleet's hub a picker
// narrows every request to one cluster (cluster=).

import { getJSON } from './api.js';
import { div, button, notice, errorBox, plural, helpBox } from './dom.js';
import { Bars, PALETTE, groupColour, groupLabel, bucketSpan, OTHER_COLOUR } from './bars.js';
import { formatTime } from './scale.js';

const HOUR = 3600e3;
// Windows and their buckets: about two dozen bars each.
export const WINDOWS = [
  { name: '1h', ms: HOUR, bucket: 300 },
  { name: '6h', ms: 6 * HOUR, bucket: 900 },
  { name: '24h', ms: 24 * HOUR, bucket: 3600 },
  { name: '7d', ms: 7 * 24 * HOUR, bucket: 12 * 3600 },
  { name: '30d', ms: 30 * 24 * HOUR, bucket: 24 * 3600 },
];

function windowFor(config, name) {
  const named = WINDOWS.find((w) => w.name === name);
  if (named) return named;
  // The command line's --since picks the smallest window holding it.
  if (config.since) {
    const span = Date.now() - config.since;
    return WINDOWS.find((w) => w.ms >= span) || WINDOWS[WINDOWS.length - 1];
  }
  return WINDOWS[2];
}

export class EventsView {
  // query is the scope (namespace, allNamespaces); params the URL
  // fragment's state (by, window, search, cluster).
  constructor(root, notices, config, query, params) {
    this.root = root;
    this.notices = notices;
    this.config = config;
    this.scope = { namespace: query.namespace, allNamespaces: !!query.allNamespaces };
    if (params.get('namespace')) this.scope = { namespace: params.get('namespace'), allNamespaces: false };
    if (params.get('allNamespaces') === 'true') this.scope = { namespace: '', allNamespaces: true };
    this.by = params.get('by') === 'type' ? 'type' : 'reason';
    this.window = windowFor(config, params.get('window'));
    this.search = params.get('search') || '';
    this.cluster = params.get('cluster') || '';
    // At most as many groups as the palette has colours told apart.
    this.top = Math.min(PALETTE.length, Math.max(1, Number(params.get('top')) || PALETTE.length));
    this.mode = 'chart';
    this.loads = 0;
  }

  where() {
    const s = this.scope;
    const ns = s.allNamespaces ? 'in every namespace' : `in namespace ${s.namespace}`;
    return this.cluster ? `${ns} of cluster ${this.cluster}` : ns;
  }

  scopeParams() {
    const p = this.scope.allNamespaces ? { allNamespaces: 'true' } : { namespace: this.scope.namespace };
    if (this.cluster) p.cluster = this.cluster;
    return p;
  }

  // remember keeps the view's state in the URL, so that back from a story
  // returns to it, without reloading the view.
  remember() {
    const p = new URLSearchParams(this.scopeParams());
    p.set('by', this.by);
    p.set('window', this.window.name);
    if (this.search) p.set('search', this.search);
    if (this.top !== PALETTE.length) p.set('top', String(this.top));
    history.replaceState(null, '', `#events?${p}`);
  }

  async start() {
    document.title = 'Events over time · kubectl timeline';
    document.getElementById('title').textContent = 'Events over time';
    this.layout();
    await this.loadClusters();
    await this.load();
  }

  stop() {
    this.stopped = true;
  }

  layout() {
    const root = this.root;
    root.replaceChildren();
    const bar = div('toolbar', root);
    bar.setAttribute('role', 'toolbar');
    bar.setAttribute('aria-label', 'View');
    const views = div('group', bar);
    this.chartButton = button('Chart', () => this.show('chart'), views);
    this.tableButton = button('Table', () => this.show('table'), views);
    const by = div('group by', bar);
    by.setAttribute('aria-label', 'Stack by');
    this.byButtons = ['reason', 'type'].map((b) => {
      const el = button(`By ${b}`, () => {
        this.by = b;
        this.load();
      }, by);
      el.dataset.by = b;
      return el;
    });
    const win = document.createElement('label');
    win.className = 'check';
    win.append('Window ');
    this.windowSelect = document.createElement('select');
    this.windowSelect.id = 'window';
    for (const w of WINDOWS) {
      const o = document.createElement('option');
      o.value = w.name;
      o.textContent = `last ${w.name}`;
      this.windowSelect.appendChild(o);
    }
    this.windowSelect.value = this.window.name;
    this.windowSelect.addEventListener('change', () => {
      this.window = windowFor(this.config, this.windowSelect.value);
      this.load();
    });
    win.appendChild(this.windowSelect);
    bar.appendChild(win);
    this.clusterBox = div('cluster-box', bar);

    const form = document.createElement('form');
    form.className = 'search';
    form.setAttribute('role', 'search');
    const label = document.createElement('label');
    label.htmlFor = 'search';
    label.textContent = 'Search the notes ';
    this.searchInput = document.createElement('input');
    this.searchInput.type = 'search';
    this.searchInput.id = 'search';
    this.searchInput.value = this.search;
    this.searchInput.placeholder = 'e.g. x509, at least 3 letters';
    this.searchInput.setAttribute('aria-describedby', 'search-help');
    const go = document.createElement('button');
    go.type = 'submit';
    go.textContent = 'Search';
    const clear = button('Clear', () => {
      this.searchInput.value = '';
      this.runSearch();
    }, form);
    form.prepend(label, this.searchInput, go);
    form.appendChild(clear);
    const hint = document.createElement('span');
    hint.id = 'search-help';
    hint.className = 'hint';
    hint.textContent = 'Counts only the Events whose note holds it, and lists their objects.';
    form.appendChild(hint);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.runSearch();
    });
    root.appendChild(form);
    this.searchError = div('search-error', root);

    this.status = div('', root);
    this.legendBox = div('legend groups', root);
    this.chartBox = div('chart-box', root);
    this.tableBox = div('table-box', root);
    this.tableBox.hidden = true;
    this.queryBox = div('query', root);
    this.drillBox = document.createElement('section');
    this.drillBox.className = 'drill';
    this.drillBox.setAttribute('aria-live', 'polite');
    root.appendChild(this.drillBox);
    helpBox(root, [
      'Tab reaches the bars; the left and right arrows move between time buckets, up and down between the groups of a bar, Home and End to the first and last bucket.',
      'A focused or hovered segment says its group, its time and its count; Enter, Space or a click lists the objects behind it, each a link to its story.',
      'The Table view lists the same counts, a row per bucket, a column per group.',
    ]);
    this.bars = new Bars(this.chartBox, { onOpen: (s) => this.drill(s) });
    this.show(this.mode);
  }

  show(mode) {
    this.mode = mode;
    this.chartButton.setAttribute('aria-pressed', String(mode === 'chart'));
    this.tableButton.setAttribute('aria-pressed', String(mode === 'table'));
    this.chartBox.hidden = mode !== 'chart';
    this.tableBox.hidden = mode !== 'table';
  }

  // loadClusters offers the clusters the user may count, where there is
  // more than one (a fleet's hub); a reader of some clusters only cannot
  // count across them, and names one.
  async loadClusters() {
    const box = this.clusterBox;
    box.replaceChildren();
    let clusters;
    try {
      clusters = await getJSON('api/clusters', {
        ...(this.scope.allNamespaces ? { allNamespaces: 'true' } : { namespace: this.scope.namespace }),
        since: String(Date.now() - this.window.ms),
      });
    } catch (e) {
      // The chart's own request says what is wrong.
      return;
    }
    if (this.stopped) return;
    const label = document.createElement('label');
    label.className = 'check';
    label.append('Cluster ');
    if (clusters.available && clusters.names.length <= 1 && !this.cluster) return;
    if (clusters.available) {
      const select = document.createElement('select');
      select.id = 'cluster';
      const all = document.createElement('option');
      all.value = '';
      all.textContent = 'all clusters';
      select.appendChild(all);
      const names = [...clusters.names];
      if (this.cluster && !names.includes(this.cluster)) names.push(this.cluster);
      for (const n of names) {
        const o = document.createElement('option');
        o.value = n;
        o.textContent = n;
        select.appendChild(o);
      }
      select.value = this.cluster;
      select.addEventListener('change', () => {
        this.cluster = select.value;
        this.drillBox.replaceChildren();
        this.load();
      });
      label.appendChild(select);
      box.appendChild(label);
      this.picker = true;
      return;
    }
    if (!/forbidden/i.test(clusters.reason || '')) return;
    // Not allowed across clusters: a field to name one.
    const input = document.createElement('input');
    input.id = 'cluster';
    input.size = 16;
    input.value = this.cluster;
    input.placeholder = 'a cluster you may read';
    input.addEventListener('change', () => {
      this.cluster = input.value.trim();
      this.drillBox.replaceChildren();
      this.load();
    });
    label.appendChild(input);
    box.appendChild(label);
    this.picker = true;
    this.clusterReason = clusters.reason;
  }

  countParams() {
    const since = Date.now() - this.window.ms;
    const p = { ...this.scopeParams(), by: this.by, since: String(since), bucket: String(this.window.bucket), top: String(this.top) };
    if (this.search) p.search = this.search;
    return p;
  }

  async load() {
    const load = ++this.loads;
    for (const b of this.byButtons) b.setAttribute('aria-pressed', String(b.dataset.by === this.by));
    this.remember();
    document.body.dataset.state = 'loading';
    let counts;
    try {
      counts = await getJSON('api/counts', this.countParams());
    } catch (e) {
      if (this.stopped || load !== this.loads) return;
      this.fail(e);
      return;
    }
    if (this.stopped || load !== this.loads) return;
    this.counts = counts;
    this.notify();
    if (!counts.history.available) {
      await this.showLive();
      return;
    }
    this.draw();
    if (this.search && !this.searched) {
      // A search in the URL (back from a story) lists its objects again.
      this.searched = true;
      await this.listSearch(this.search);
    }
    document.body.dataset.state = 'ready';
  }

  // runSearch narrows the chart to the Events whose notes hold the term
  // and lists their objects, in the window. A term the API refuses (too
  // short, no run of three letters) is its 400, shown as it says it, and
  // the chart stays as it was.
  async runSearch() {
    this.searched = true;
    const term = this.searchInput.value.trim();
    this.searchError.replaceChildren();
    if (term && !(await this.listSearch(term))) return;
    if (!term) this.drillBox.replaceChildren();
    this.search = term;
    await this.load();
  }

  // listSearch lists the objects of the Events whose notes hold term;
  // false where the API refused it.
  async listSearch(term) {
    const since = Date.now() - this.window.ms;
    this.drillBox.dataset.state = 'loading';
    try {
      const objects = await getJSON('api/objects', { ...this.scopeParams(), by: this.by, any: 'true', since: String(since), search: term });
      this.drawObjects(objects, `Objects with Events whose note holds “${term}”, last ${this.window.name}`);
      return true;
    } catch (e) {
      const box = errorBox(this.searchError, e, 'The search could not run');
      box.classList.add('inline');
      this.drillBox.dataset.state = 'error';
      return false;
    }
  }

  fail(e) {
    this.status.replaceChildren();
    this.legendBox.replaceChildren();
    this.bars.draw({ ...emptyCounts(), by: this.by }, 'No counts');
    this.tableBox.replaceChildren();
    this.queryBox.replaceChildren();
    errorBox(this.status, e, 'The counts could not be loaded');
    this.notices.replaceChildren();
    this.notifyClusters();
    document.getElementById('subtitle').textContent = this.where();
    document.body.dataset.state = 'error';
  }

  notify() {
    const n = this.notices;
    n.replaceChildren();
    const c = this.counts;
    if (!c.history.available) {
      notice(n, 'warn', 'History is not available: ',
        `${c.history.reason}. Counts over time need history (history.eventapiserver.io); below are the live Events' objects instead.`);
    }
    this.notifyClusters();
  }

  notifyClusters() {
    if (this.clusterReason && !this.cluster) {
      notice(this.notices, 'info', 'Clusters: ', `you may not count across every cluster (${this.clusterReason}); name a cluster you may read.`);
    }
  }

  draw() {
    const c = this.counts;
    this.status.replaceChildren();
    const sum = `${plural(c.total, 'Event version')} from ${formatTime(c.since)} to ${formatTime(c.until)}, by ${c.by}, ${c.buckets.length} buckets`;
    document.getElementById('subtitle').textContent = `${this.where()}: ${sum}`;
    this.legend();
    this.bars.draw(c, `Events over time ${this.where()}: ${sum}. Arrow keys move between the segments; Enter lists their objects.`);
    this.table();
    this.queryBox.replaceChildren();
    const p = document.createElement('p');
    p.className = 'query';
    p.dataset.kind = c.kind;
    p.dataset.fieldSelector = c.fieldSelector;
    p.dataset.by = c.by;
    p.dataset.bucket = String(c.bucket / 1000);
    p.dataset.top = String(c.top);
    const code = document.createElement('code');
    code.textContent = `${c.kind} spec.fieldSelector=${c.fieldSelector} groupBy=${c.by} bucketSize=${c.bucket / 1000}s top=${c.top}`;
    p.append('Counted by the server: ', code);
    if (c.other > 0) p.append(`. Beyond the ${c.groups.length} largest groups, ${c.other} versions are counted as other.`);
    this.queryBox.appendChild(p);
  }

  legend() {
    const c = this.counts;
    const box = this.legendBox;
    box.replaceChildren();
    box.setAttribute('role', 'list');
    box.setAttribute('aria-label', 'Groups');
    const item = (colour, text, hatch) => {
      const span = document.createElement('span');
      span.setAttribute('role', 'listitem');
      const sw = document.createElement('span');
      sw.className = hatch ? 'swatch other' : 'swatch';
      sw.style.background = colour;
      sw.setAttribute('aria-hidden', 'true');
      span.append(sw, ` ${text}`);
      box.appendChild(span);
    };
    c.groups.forEach((g, i) => item(groupColour(c.by, g.value, i), `${groupLabel(g.value)} (${g.total})`));
    if (c.other > 0) item(OTHER_COLOUR, `Other (${c.other})`, true);
  }

  table() {
    const c = this.counts;
    const t = document.createElement('table');
    t.className = 'events counts';
    const cap = document.createElement('caption');
    cap.textContent = `Event versions per ${c.bucket / 1000 >= 86400 ? 'day' : 'bucket'} ${this.where()}, by ${c.by}; oldest first`;
    t.appendChild(cap);
    const head = t.createTHead().insertRow();
    const th = (text, row, scope = 'col') => {
      const h = document.createElement('th');
      h.scope = scope;
      h.textContent = text;
      row.appendChild(h);
      return h;
    };
    th('From', head);
    c.groups.forEach((g) => {
      th(groupLabel(g.value), head).dataset.value = g.value;
    });
    th('Other', head);
    th('Total', head);
    const body = t.createTBody();
    c.buckets.forEach((b, bi) => {
      const tr = body.insertRow();
      tr.dataset.start = String(b.start);
      th(formatTime(Math.max(b.start, c.since)), tr, 'row');
      b.counts.forEach((n, gi) => {
        const td = tr.insertCell();
        td.dataset.group = String(gi);
        td.dataset.bucket = String(bi);
        td.textContent = String(n);
      });
      const other = tr.insertCell();
      other.dataset.group = '-1';
      other.textContent = String(b.other);
      tr.insertCell().textContent = String(b.counts.reduce((a, x) => a + x, 0) + b.other);
    });
    const foot = t.createTFoot().insertRow();
    th('Window', foot, 'row');
    c.groups.forEach((g, gi) => {
      const td = foot.insertCell();
      td.dataset.group = String(gi);
      td.textContent = String(g.total);
    });
    foot.insertCell().textContent = String(c.other);
    foot.insertCell().textContent = String(c.total);
    this.tableBox.replaceChildren(t);
  }

  // drill lists the objects behind a segment: the records of its group (or
  // of none of the groups, for other) last seen in its bucket.
  async drill(s) {
    const c = this.counts;
    const since = Math.max(s.start, c.since);
    const params = { ...this.scopeParams(), by: c.by, since: String(since), until: String(s.start + c.bucket) };
    if (this.search) params.search = this.search;
    let name;
    if (s.group < 0) {
      params.other = 'true';
      params.except = c.groups.map((g) => g.value);
      name = 'Other';
    } else {
      params.value = c.groups[s.group].value;
      name = groupLabel(params.value);
    }
    const title = `Objects behind ${name}, ${bucketSpan(c, s.start)} (${plural(s.n, 'Event version')} counted)`;
    this.drillBox.replaceChildren();
    this.drillBox.dataset.state = 'loading';
    try {
      const objects = await getJSON('api/objects', listParams(params));
      this.drawObjects(objects, title);
    } catch (e) {
      errorBox(this.drillBox, e, 'The objects could not be listed');
      this.drillBox.dataset.state = 'error';
    }
  }

  async showLive() {
    this.status.replaceChildren();
    this.legendBox.replaceChildren();
    this.chartBox.replaceChildren();
    this.tableBox.replaceChildren();
    this.queryBox.replaceChildren();
    document.getElementById('subtitle').textContent = `${this.where()}: live Events only`;
    try {
      const objects = await getJSON('api/objects', { ...this.scopeParams(), live: 'true' });
      this.drawObjects(objects, `Objects of the live Events ${this.where()} (the Events API keeps them for its TTL, an hour by default)`);
    } catch (e) {
      errorBox(this.drillBox, e, 'The live Events could not be listed');
      document.body.dataset.state = 'error';
      return;
    }
    document.body.dataset.state = 'ready';
  }

  drawObjects(objects, title) {
    const box = this.drillBox;
    box.replaceChildren();
    const h = document.createElement('h2');
    h.textContent = title;
    h.tabIndex = -1;
    box.appendChild(h);
    if (objects.fieldSelector) {
      const p = document.createElement('p');
      p.className = 'query';
      const code = document.createElement('code');
      code.textContent = objects.fieldSelector;
      p.append('Listed eventrecords with ', code);
      box.appendChild(p);
    }
    if (objects.truncated) {
      notice(box, 'warn', 'Truncated: ', `only the first ${objects.records} records were read; narrow the window or the search for all of them.`);
    }
    if (objects.objectsTruncated) {
      notice(box, 'warn', 'Truncated: ', `only the ${objects.objects.length} objects with the most records are listed.`);
    }
    const t = document.createElement('table');
    t.className = 'events objects';
    const cap = document.createElement('caption');
    cap.textContent = `${plural(objects.objects.length, 'object')}, ${plural(objects.records, 'record')}, the most records first`;
    t.appendChild(cap);
    const head = t.createTHead().insertRow();
    const cols = ['Object', 'Namespace', 'Records', 'Warnings', 'Incarnations', 'Last seen'];
    // The cluster column where there is more than one to tell apart.
    const clustered = this.picker || new Set(objects.objects.map((o) => o.cluster)).size > 1;
    if (clustered) cols.splice(2, 0, 'Cluster');
    for (const col of cols) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = col;
      head.appendChild(th);
    }
    const body = t.createTBody();
    for (const o of objects.objects) {
      const tr = body.insertRow();
      tr.dataset.kind = o.kind;
      tr.dataset.name = o.name;
      tr.dataset.namespace = o.namespace;
      tr.dataset.records = String(o.records);
      const cell = document.createElement('th');
      cell.scope = 'row';
      const a = document.createElement('a');
      a.className = 'story-link';
      const p = new URLSearchParams({ kind: o.kind, name: o.name, group: groupOf(o.apiVersion) });
      if (o.namespace) p.set('namespace', o.namespace);
      else p.set('allNamespaces', 'true');
      if (o.cluster && this.cluster) p.set('cluster', o.cluster);
      a.href = `#story?${p}`;
      a.textContent = `${o.kind} ${o.name}`;
      cell.appendChild(a);
      tr.appendChild(cell);
      const values = [o.namespace || '(cluster-scoped)', String(o.records), String(o.warnings), String(o.uids), formatTime(o.last)];
      if (clustered) values.splice(1, 0, o.cluster);
      for (const v of values) tr.insertCell().textContent = v;
    }
    box.appendChild(t);
    box.dataset.state = 'ready';
    h.focus({ preventScroll: true });
  }
}

// listParams spells repeated values (except) as repeated parameters.
function listParams(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (Array.isArray(v)) for (const x of v) p.append(k, x);
    else p.set(k, v);
  }
  return p;
}

function groupOf(apiVersion) {
  return apiVersion && apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
}

function emptyCounts() {
  return { groups: [], buckets: [], since: 0, until: 0, bucket: 1, total: 0, other: 0 };
}
