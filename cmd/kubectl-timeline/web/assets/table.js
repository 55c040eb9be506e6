// The table view: the same Events as the chart, as rows, oldest first, in
// pages, for reading, copying and screen readers.

import { formatTime } from './scale.js';
import { STATE_TEXT } from './model.js';
import { typeClass } from './chart.js';

const PAGE = 200;

export class Table {
  constructor(container) {
    this.container = container;
    this.page = 0;
    this.rows = [];
  }

  draw(lanes, caption) {
    const rows = [];
    for (const l of lanes) for (const r of l.records) rows.push({ l, r });
    rows.sort((a, b) => a.r.last - b.r.last || a.r.version - b.r.version);
    this.rows = rows;
    this.caption = caption;
    this.page = Math.min(this.page, Math.max(0, Math.ceil(rows.length / PAGE) - 1));
    this.render();
  }

  render() {
    const c = this.container;
    c.replaceChildren();
    const pages = Math.max(1, Math.ceil(this.rows.length / PAGE));
    const from = this.page * PAGE;
    const to = Math.min(this.rows.length, from + PAGE);
    const nav = document.createElement('nav');
    nav.className = 'pager';
    nav.setAttribute('aria-label', 'Table pages');
    const prev = button('Previous page', this.page === 0, () => this.go(-1));
    const next = button('Next page', this.page >= pages - 1, () => this.go(1));
    const where = document.createElement('span');
    where.textContent = this.rows.length ? `Events ${from + 1}–${to} of ${this.rows.length}` : 'No Events';
    nav.append(prev, where, next);

    const table = document.createElement('table');
    table.className = 'events';
    const cap = document.createElement('caption');
    cap.textContent = this.caption;
    table.appendChild(cap);
    const head = table.createTHead().insertRow();
    for (const h of ['Object', 'Type', 'Reason', 'Count', 'First seen', 'Last seen', 'Reporter', 'State', 'Message']) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = h;
      head.appendChild(th);
    }
    const body = table.createTBody();
    for (const { l, r } of this.rows.slice(from, to)) {
      const tr = body.insertRow();
      tr.dataset.id = r.id;
      const obj = document.createElement('th');
      obj.scope = 'row';
      obj.textContent = `${l.kind} ${l.name} (uid ${(l.uid || 'unknown').slice(0, 8)}, ${STATE_TEXT[l.state]})`;
      tr.appendChild(obj);
      const type = tr.insertCell();
      const badge = document.createElement('span');
      badge.className = `badge ${typeClass(r.type)}`;
      badge.textContent = r.type || 'none';
      type.appendChild(badge);
      const cells = [[r.reason], [String(r.count)], [formatTime(r.first), 'time'], [formatTime(r.last), 'time'], [r.reporter],
        [r.live ? 'live' : r.ended ? `ended ${formatTime(r.ended)}` : 'ended'], [r.note, 'note']];
      for (const [v, cls] of cells) {
        const td = tr.insertCell();
        td.textContent = v;
        if (cls) td.className = cls;
      }
    }
    c.append(nav, table);
  }

  go(step) {
    this.page += step;
    this.render();
    this.container.querySelector('table').focus?.();
  }
}

function button(text, disabled, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.disabled = disabled;
  b.addEventListener('click', onClick);
  return b;
}
