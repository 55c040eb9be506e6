// The story view: one object's Events over all its incarnations, with what
// it owns folded in, as a chart and as a table, following new Events with
// -w.

import { getJSON, follow } from './api.js';
import { div, button, notice, errorBox, helpBox } from './dom.js';
import { Model } from './model.js';
import { Chart, SHAPES } from './chart.js';
import { Table } from './table.js';
import { formatTime } from './scale.js';

// Reconnects after a dropped or failed watch wait this long, doubling up
// to a minute.
const RETRY_MS = 1000;
const MAX_RETRY_MS = 60000;

export class StoryView {
  // query is the object (kind, name, namespace, allNamespaces, group,
  // tree); config what the command line asked for (since, types, watch).
  constructor(root, notices, config, query) {
    this.root = root;
    this.notices = notices;
    this.config = config;
    this.query = query;
    this.retryMs = RETRY_MS;
    this.first = true;
    this.mode = 'chart';
  }

  params() {
    const q = this.query;
    const p = { kind: q.kind, name: q.name, group: q.group || '', tree: String(!!q.tree) };
    if (q.allNamespaces) p.allNamespaces = 'true';
    else p.namespace = q.namespace;
    if (q.cluster) p.cluster = q.cluster;
    if (this.config.since) p.since = String(this.config.since);
    if (this.config.types && this.config.types.length) p.types = this.config.types.join(',');
    return p;
  }

  async start() {
    const q = this.query;
    document.title = `${q.kind} ${q.name} · kubectl timeline`;
    document.getElementById('title').textContent = `${q.kind} ${q.name}`;
    this.layout();
    await this.load();
  }

  stop() {
    this.stopped = true;
    if (this.unfollow) this.unfollow();
    clearTimeout(this.retry);
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
    const zoom = div('group', bar);
    button('Zoom in', () => this.chart.zoom(1.5), zoom).setAttribute('aria-label', 'Zoom in (+)');
    button('Zoom out', () => this.chart.zoom(1 / 1.5), zoom).setAttribute('aria-label', 'Zoom out (-)');
    button('Reset', () => this.chart.reset(), zoom).setAttribute('aria-label', 'Reset zoom (0)');
    this.zoomGroup = zoom;
    const tree = document.createElement('label');
    tree.className = 'check';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = !!this.query.tree;
    box.addEventListener('change', () => {
      this.query.tree = box.checked;
      this.reload();
    });
    tree.append(box, ' Fold in what it owns');
    bar.appendChild(tree);
    this.range = div('range', bar);
    this.range.setAttribute('aria-hidden', 'true');
    legend(root);
    this.chartBox = div('chart-box', root);
    this.tableBox = div('table-box', root);
    this.tableBox.hidden = true;
    helpBox(root, [
      'Tab reaches the Events; the arrow keys move between them (left and right in a lane, up and down across lanes), Home and End to a lane\'s first and last.',
      'A focused or hovered Event shows its reason, reporter, count and message.',
      '+ and - zoom around the focused Event, Shift with the left and right arrows pans, 0 resets.',
      'The mouse wheel over the lanes zooms around the pointer; drag to pan; the wheel over the names scrolls the page.',
      'The Table view lists the same Events as rows.',
    ]);
    this.chart = new Chart(this.chartBox, {
      onZoom: (s) => {
        this.range.textContent = `${formatTime(s.start)} – ${formatTime(s.end)}`;
      },
    });
    this.table = new Table(this.tableBox);
    this.show(this.mode);
  }

  show(mode) {
    this.mode = mode;
    this.chartButton.setAttribute('aria-pressed', String(mode === 'chart'));
    this.tableButton.setAttribute('aria-pressed', String(mode === 'table'));
    this.chartBox.hidden = mode !== 'chart';
    this.tableBox.hidden = mode !== 'table';
    for (const b of this.zoomGroup.querySelectorAll('button')) b.disabled = mode !== 'chart';
    if (this.model) this.draw();
  }

  reload() {
    if (this.unfollow) this.unfollow();
    clearTimeout(this.retry);
    this.load();
  }

  async load() {
    let story;
    try {
      story = await getJSON('api/story', this.params());
    } catch (e) {
      if (this.stopped) return;
      this.fail(e);
      return;
    }
    if (this.stopped) return;
    const first = this.first;
    this.first = false;
    if (first) performance.mark('timeline:story-loaded');
    this.story = story;
    this.model = new Model(story, this.config.watch);
    this.notify();
    this.draw();
    if (first) {
      performance.mark('timeline:lanes-drawn');
      // Two frames: the second callback runs once the first frame with
      // the lanes has been painted.
      requestAnimationFrame(() => requestAnimationFrame(() => {
        performance.mark('timeline:painted');
        performance.measure('timeline:first-paint', { start: 0, end: 'timeline:painted' });
        document.body.dataset.state = 'ready';
      }));
    } else {
      document.body.dataset.state = 'ready';
    }
    if (this.config.watch) this.follow();
  }

  fail(e) {
    this.root.replaceChildren();
    errorBox(this.root, e, 'The timeline could not be loaded');
    document.getElementById('subtitle').textContent = this.where();
    document.body.dataset.state = 'error';
  }

  where() {
    const q = this.query;
    const where = q.allNamespaces ? 'in every namespace' : `in namespace ${q.namespace}`;
    return q.cluster ? `${where} of cluster ${q.cluster}` : where;
  }

  draw() {
    const lanes = this.model.lanes();
    const n = this.model.size;
    let first = Infinity;
    let last = -Infinity;
    for (const l of lanes) {
      first = Math.min(first, l.first);
      last = Math.max(last, l.last);
    }
    const span = n ? `, from ${formatTime(first)} to ${formatTime(last)}` : '';
    const summary = `${n} Events in ${lanes.length} lanes${span}`;
    document.getElementById('subtitle').textContent = `${this.where()}: ${summary}`;
    if (this.mode === 'chart') {
      this.chart.showNamespace = !!this.query.allNamespaces;
      this.chart.draw(lanes, {
        summary: `Timeline of ${this.query.kind} ${this.query.name}: ${summary}. One lane per object; arrow keys move between Events.`,
        following: this.config.watch,
      });
    } else {
      this.table.draw(lanes, `${this.query.kind} ${this.query.name}: ${summary}, oldest first`);
    }
  }

  scheduleDraw() {
    if (this.drawing) return;
    this.drawing = requestAnimationFrame(() => {
      this.drawing = 0;
      this.draw();
    });
  }

  follow() {
    const story = this.story;
    const params = {
      ...this.params(),
      resourceVersion: story.resourceVersion,
      liveResourceVersion: story.liveResourceVersion,
      history: String(story.history.available),
      owned: story.objects.filter((o) => o.owner).map((o) => o.uid).join(','),
    };
    this.unfollow = follow(params, {
      onOpen: () => {
        this.retryMs = RETRY_MS;
        this.watchNotice(`Following new Events of ${story.followed}.`, 'info');
      },
      onRecord: (r) => {
        if (this.model.add(r)) this.scheduleDraw();
      },
      onEnd: (status) => {
        if (this.stopped) return;
        const why = status ? `The watch ended: ${status.message}` : 'The connection to kubectl timeline dropped';
        this.watchNotice(`${why}. Reloading in ${Math.round(this.retryMs / 1000)}s…`, 'warn');
        this.retry = setTimeout(() => this.load(), this.retryMs);
        this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs * 2);
      },
    });
  }

  notify() {
    const s = this.story;
    const n = this.notices;
    n.replaceChildren();
    if (!s.history.available) notice(n, 'warn', 'History is not available. ', s.history.reason);
    if (!s.lookup.available) {
      notice(n, 'info', 'Which of these objects still exist is not known: ',
        `${s.lookup.reason}. An incarnation is marked deleted only where a newer one of the same name replaced it.`);
    }
    if (s.tree) {
      const count = s.objects.filter((o) => o.owner).length;
      const kinds = s.tree.kinds.length ? s.tree.kinds.map((k) => `${k}s`).join(' and ') : '';
      if (kinds) {
        const cut = s.tree.truncated ? ` (the first ${s.tree.limit} only)` : '';
        notice(n, 'info', 'Owner tree: ',
          `the ${kinds} it owns now are folded in, ${count} objects${cut}. ` +
          'What it owned that is gone (a ReplicaSet of an earlier rollout, a Pod that was replaced) is not: the cluster no longer has those objects, and an Event does not record who owned its object, so nothing can tell which of the deleted ones were this one\'s. Their Events are kept under their own names.');
      }
      if (s.tree.reason) notice(n, 'warn', 'Part of the owner tree could not be read: ', s.tree.reason);
    }
    if (s.dropped) notice(n, 'warn', 'Not all Events are drawn: ', `the ${s.dropped} oldest are left out. Narrow the story with --since.`);
    this.watchBox = div('', n);
  }

  watchNotice(text, kind) {
    if (!this.watchBox) return;
    this.watchBox.replaceChildren();
    notice(this.watchBox, kind, '', text).classList.add('watch');
  }
}

function legend(parent) {
  const SVG = 'http://www.w3.org/2000/svg';
  const box = div('legend', parent);
  box.setAttribute('aria-label', 'Legend');
  box.setAttribute('role', 'note');
  const item = (cls, d, text, bar = false) => {
    const span = document.createElement('span');
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('width', bar ? 30 : 16);
    svg.setAttribute('height', 16);
    svg.setAttribute('aria-hidden', 'true');
    if (bar) {
      const r = document.createElementNS(SVG, 'rect');
      for (const [k, v] of Object.entries({ x: 1, y: 4, width: 22, height: 8, rx: 2, class: 'bar normal' })) r.setAttribute(k, v);
      svg.appendChild(r);
    }
    if (d) {
      const p = document.createElementNS(SVG, 'path');
      p.setAttribute('d', d);
      p.setAttribute('class', `mark ${cls}`);
      p.setAttribute('transform', bar ? 'translate(23,8)' : 'translate(8,8)');
      svg.appendChild(p);
    } else {
      const r = document.createElementNS(SVG, 'rect');
      for (const [k, v] of Object.entries({ x: 0, y: 0, width: 16, height: 16, fill: 'url(#legend-hatch)', class: 'lane-deleted' })) r.setAttribute(k, v);
      const defs = document.createElementNS(SVG, 'defs');
      const pat = document.createElementNS(SVG, 'pattern');
      for (const [k, v] of Object.entries({ id: 'legend-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' })) pat.setAttribute(k, v);
      const line = document.createElementNS(SVG, 'line');
      for (const [k, v] of Object.entries({ x1: 0, y1: 0, x2: 0, y2: 6, class: 'hatch-line' })) line.setAttribute(k, v);
      pat.appendChild(line);
      defs.appendChild(pat);
      svg.append(defs, r);
    }
    span.append(svg, ` ${text}`);
    box.appendChild(span);
  };
  item('normal', SHAPES.Normal, 'Normal');
  item('warning', SHAPES.Warning, 'Warning');
  item('other', SHAPES.other, 'Other type');
  item('normal', SHAPES.Normal, 'A series: first to last time, ×count', true);
  item('', '', 'A deleted object\'s lane');
}
