// The lanes as SVG: one lane per object, each Event a mark at the time it
// last happened, shaped and coloured by type, a series a bar from its first
// to its last observation labelled with its count. Zoom and pan by time with
// the wheel, a drag, the buttons or the keyboard; every mark is reachable
// with the arrow keys and says what it is, on hover and on focus.

import { TimeScale, formatTime, formatSpan } from './scale.js';
import { STATE_TEXT } from './model.js';
import { el, chartFrame } from './dom.js';

const LABEL_WIDTH = 250;
const AXIS_HEIGHT = 36;
const LANE_HEIGHT = 48;
const RIGHT_PAD = 28;
// Marks of a type closer than this many pixels in a lane are drawn as one.
const BIN = 3;

// Shapes centred on 0,0: type is told by shape as well as colour.
export const SHAPES = {
  Normal: 'M-5.5,0a5.5,5.5 0 1,0 11,0a5.5,5.5 0 1,0 -11,0z',
  Warning: 'M0,-7L6.5,5H-6.5z',
  other: 'M-5,-5H5V5H-5z',
};

export function typeClass(type) {
  return type === 'Normal' || type === 'Warning' ? type.toLowerCase() : 'other';
}

// describe is a mark's text alternative, the tooltip's text in one line.
export function describe(r) {
  const times = r.count > 1 ? `${r.count} times from ${formatTime(r.first)} to ${formatTime(r.last)}` : `at ${formatTime(r.last)}`;
  const state = r.live ? 'live' : r.ended ? `ended ${formatTime(r.ended)}` : 'ended';
  return `${r.type || 'No type'} ${r.reason}, ${times}, reported by ${r.reporter || 'unknown'} (${state}): ${r.note}`;
}

export class Chart {
  constructor(container, { onZoom } = {}) {
    this.container = container;
    this.onZoom = onZoom || (() => {});
    ({ wrap: this.wrap, svg: this.svg, tooltip: this.tooltip } = chartFrame(container, 'chart', 'mark-tooltip'));
    this.scale = null;
    this.atHome = true;
    this.items = [];
    this.byLane = [];
    this.focusedId = '';
    this.frame = 0;
    this.listen();
  }

  get width() {
    return Math.max(600, this.wrap.clientWidth || 960);
  }

  // draw builds the lanes and marks for lanes, keeping the zoom unless the
  // user has not zoomed, in which case the view fits the data (and now,
  // while following).
  draw(lanes, { summary, following }) {
    this.lastDraw = [lanes, { summary, following }];
    const width = this.width;
    let start = Infinity;
    let end = -Infinity;
    for (const l of lanes) {
      start = Math.min(start, l.first);
      end = Math.max(end, l.last);
    }
    if (following) end = Math.max(end, Date.now());
    if (start === Infinity) {
      start = Date.now() - 3600e3;
      end = Date.now();
    }
    if (!this.scale) {
      this.scale = new TimeScale(start, end, LABEL_WIDTH, width - RIGHT_PAD);
    } else {
      this.scale.resize(LABEL_WIDTH, width - RIGHT_PAD);
      if (this.atHome) this.scale.reset(start, end);
    }
    const height = AXIS_HEIGHT + Math.max(1, lanes.length) * LANE_HEIGHT + 8;
    const svg = this.svg;
    svg.replaceChildren();
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('aria-label', summary);
    this.height = height;

    const defs = el('defs', {}, svg);
    const hatch = el('pattern', { id: 'hatch', width: 8, height: 8, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' }, defs);
    el('rect', { width: 8, height: 8, class: 'hatch-bg' }, hatch);
    el('line', { x1: 0, y1: 0, x2: 0, y2: 8, class: 'hatch-line' }, hatch);
    const clip = el('clipPath', { id: 'plot-clip' }, defs);
    el('rect', { x: LABEL_WIDTH - 8, y: 0, width: width - LABEL_WIDTH - RIGHT_PAD + 16, height }, clip);

    this.axis = el('g', { class: 'axis', 'aria-hidden': 'true' }, svg);
    const lanesG = el('g', { class: 'lanes' }, svg);
    const plot = el('g', { class: 'plot', 'clip-path': 'url(#plot-clip)' }, svg);
    this.plot = plot;
    this.items = [];
    this.byLane = [];
    lanes.forEach((l, i) => {
      const y = AXIS_HEIGHT + i * LANE_HEIGHT;
      const laneG = el('g', { class: `lane ${l.state}`, 'data-lane': l.key, 'data-state': l.state }, lanesG);
      el('rect', { x: 0, y, width, height: LANE_HEIGHT, class: i % 2 ? 'lane-bg odd' : 'lane-bg' }, laneG);
      if (l.state === 'deleted') {
        el('rect', { x: LABEL_WIDTH - 8, y: y + 1, width: width - LABEL_WIDTH - RIGHT_PAD + 16, height: LANE_HEIGHT - 2, class: 'lane-deleted', fill: 'url(#hatch)' }, laneG);
      }
      this.label(laneG, l, y);
      // Bars under marks, counts over both.
      const barsG = el('g', { class: 'bars', 'aria-hidden': 'true' }, plot);
      const marksG = el('g', {
        class: 'marks', role: 'group',
        'aria-label': `${l.kind} ${l.name}, ${STATE_TEXT[l.state]}: ${l.records.length} Events`,
      }, plot);
      const countsG = el('g', { class: 'counts', 'aria-hidden': 'true' }, plot);
      const laneItems = [];
      for (const r of l.records) {
        const cls = typeClass(r.type);
        const cy = y + LANE_HEIGHT / 2;
        const item = { r, lane: i, y: cy };
        if (r.last > r.first) {
          item.bar = el('rect', { class: `bar ${cls}`, y: cy - 4, height: 8, rx: 2 }, barsG);
        }
        if (r.count > 1) {
          item.count = el('text', { class: 'count', y: cy - 9 }, countsG);
          item.count.textContent = `×${r.count}`;
        }
        item.mark = el('path', {
          class: `mark ${cls}${r.live ? '' : ' ended'}`, d: SHAPES[r.type] || SHAPES.other,
          tabindex: '-1', role: 'img', 'aria-label': describe(r),
          'data-id': r.id, 'data-name': r.name, 'data-type': r.type || '',
        }, marksG);
        item.index = laneItems.length;
        laneItems.push(item);
        this.items.push(item);
      }
      this.byLane.push(laneItems);
    });
    this.position();
    const focused = this.items.find((it) => it.r.id === this.focusedId && !it.hidden);
    this.setTabStop(focused || this.items.find((it) => !it.hidden) || null);
    if (focused && this.hadFocus) focused.mark.focus({ preventScroll: true });
  }

  label(parent, l, y) {
    const indent = 12 + l.depth * 14;
    const g = el('g', { class: 'label' }, parent);
    let target = g;
    if (l.owner) {
      // An owned object's own story, with what it owns.
      const params = new URLSearchParams({ kind: l.kind, name: l.name, namespace: l.namespace, group: groupOf(l.apiVersion) });
      target = el('a', { href: `#story?${params}`, class: 'drill' }, g);
      // The whole label is the link, not only its glyphs.
      el('rect', { x: 4, y: y + 3, width: LABEL_WIDTH - 20, height: LANE_HEIGHT - 6, rx: 4, class: 'hit' }, target);
    }
    const name = `${l.kind} ${l.name}`;
    const title = el('title', {}, target);
    title.textContent = `${name} in ${l.namespace || 'no namespace'}, uid ${l.uid || 'unknown'}: ${STATE_TEXT[l.state]}`;
    const t1 = el('text', { x: indent, y: y + 19, class: 'lane-name' }, target);
    t1.textContent = truncate(name, 30 - l.depth * 2);
    const t2 = el('text', { x: indent, y: y + 36, class: 'lane-meta' }, target);
    const uid = l.uid ? `uid ${l.uid.slice(0, 8)}` : 'no uid';
    const ns = this.showNamespace ? `${l.namespace} · ` : '';
    t2.textContent = `${ns}${uid} · `;
    const state = el('tspan', { class: `state ${l.state}` }, t2);
    state.textContent = l.state === 'deleted' ? '✕ deleted' : STATE_TEXT[l.state];
  }

  // position places everything at the scale's current times.
  position() {
    const s = this.scale;
    this.axis.replaceChildren();
    el('line', { x1: LABEL_WIDTH - 8, x2: this.width - RIGHT_PAD + 8, y1: AXIS_HEIGHT - 0.5, y2: AXIS_HEIGHT - 0.5, class: 'axis-line' }, this.axis);
    for (const tick of s.ticks()) {
      const x = s.x(tick.t);
      el('line', { x1: x, x2: x, y1: AXIS_HEIGHT - 6, y2: this.height, class: 'grid' }, this.axis);
      const text = el('text', { x, y: AXIS_HEIGHT - 12, class: 'tick' }, this.axis);
      text.textContent = tick.label;
    }
    // Marks of one type closer than BIN pixels in a lane would paint over
    // each other: the first is drawn and says how many it stands for, the
    // rest wait for a zoom, so thousands of Events cost what the visible
    // ones cost to paint. Marks out of view are not drawn either.
    const left = LABEL_WIDTH - 16;
    const right = this.width - RIGHT_PAD + 16;
    let lane = -1;
    let bins = null;
    let lastCount = -Infinity;
    for (const it of this.items) {
      if (it.lane !== lane) {
        lane = it.lane;
        bins = new Map();
        lastCount = -Infinity;
      }
      const x = s.x(it.r.last);
      const x0 = it.bar ? s.x(it.r.first) : x;
      const inView = x >= left && x <= right;
      const key = `${it.r.type}:${Math.round(x / BIN)}`;
      const leader = inView ? bins.get(key) : null;
      it.covers = 0;
      if (leader) leader.covers++;
      else if (inView) bins.set(key, it);
      it.hidden = !inView || !!leader;
      setShown(it.mark, !it.hidden);
      if (!it.hidden) it.mark.setAttribute('transform', `translate(${x.toFixed(1)},${it.y})`);
      if (it.bar) {
        const shown = x >= left && x0 <= right;
        setShown(it.bar, shown);
        if (shown) {
          const a = Math.max(x0, left);
          it.bar.setAttribute('x', a.toFixed(1));
          it.bar.setAttribute('width', Math.max(1, Math.min(x, right) - a).toFixed(1));
        }
      }
      if (it.count) {
        const shown = !it.hidden && x - lastCount > 30;
        setShown(it.count, shown);
        if (shown) {
          it.count.setAttribute('x', (x + 7).toFixed(1));
          lastCount = x;
        }
      }
    }
    const stop = this.items.find((it) => it.mark.getAttribute('tabindex') === '0');
    if (!stop || stop.hidden) this.setTabStop(this.items.find((it) => !it.hidden) || null);
    this.onZoom(s);
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.position();
      if (this.tipItem) this.showTip(this.tipItem);
    });
  }

  zoom(factor, x) {
    if (!this.scale) return;
    this.scale.zoom(factor, x);
    this.atHome = false;
    this.schedule();
  }

  pan(dx) {
    if (!this.scale) return;
    this.scale.pan(dx);
    this.atHome = false;
    this.schedule();
  }

  reset() {
    if (!this.scale) return;
    this.scale.goHome();
    this.atHome = true;
    this.schedule();
  }

  setTabStop(item) {
    for (const it of this.items) if (it.mark.getAttribute('tabindex') === '0') it.mark.setAttribute('tabindex', '-1');
    if (item) item.mark.setAttribute('tabindex', '0');
  }

  itemOf(target) {
    const mark = target.closest && target.closest('.mark');
    if (!mark) return null;
    return this.items.find((it) => it.mark === mark) || null;
  }

  showTip(item) {
    this.tipItem = item;
    const r = item.r;
    const tip = this.tooltip;
    tip.replaceChildren();
    const head = document.createElement('div');
    head.className = 'tip-head';
    const badge = document.createElement('span');
    badge.className = `badge ${typeClass(r.type)}`;
    badge.textContent = r.type || 'No type';
    const reason = document.createElement('strong');
    reason.textContent = ` ${r.reason}`;
    head.append(badge, reason);
    tip.appendChild(head);
    const rows = [
      ['Reporter', r.reporter || 'unknown'],
      [r.count > 1 ? 'Seen' : 'At', r.count > 1 ? `${r.count} times, ${formatTime(r.first)} to ${formatTime(r.last)} (${formatSpan(r.last - r.first)})` : formatTime(r.last)],
      ['State', r.live ? 'live' : r.ended ? `ended ${formatTime(r.ended)}` : 'ended'],
      ['Event', r.name],
    ];
    if (item.covers) rows.push(['Here too', `${item.covers} more ${r.type || 'untyped'} Events; zoom in to tell them apart`]);
    const dl = document.createElement('dl');
    for (const [k, v] of rows) {
      const dt = document.createElement('dt');
      dt.textContent = k;
      const dd = document.createElement('dd');
      dd.textContent = v;
      dl.append(dt, dd);
    }
    tip.appendChild(dl);
    const note = document.createElement('p');
    note.className = 'note';
    note.textContent = r.note;
    tip.appendChild(note);
    tip.hidden = false;
    const x = this.scale.x(r.last);
    const left = Math.min(Math.max(8, x - 40), this.width - tip.offsetWidth - 8);
    // Below the mark where the window has room for it, else above.
    const below = item.y + 16;
    const fits = this.wrap.getBoundingClientRect().top + below + tip.offsetHeight < window.innerHeight;
    const top = fits || item.y < tip.offsetHeight + 14 ? below : item.y - tip.offsetHeight - 14;
    tip.style.left = `${left}px`;
    tip.style.top = `${top}px`;
    item.mark.setAttribute('aria-describedby', 'mark-tooltip');
  }

  hideTip() {
    if (this.tipItem) this.tipItem.mark.removeAttribute('aria-describedby');
    this.tipItem = null;
    this.tooltip.hidden = true;
  }

  focusItem(item) {
    if (!item) return;
    this.setTabStop(item);
    this.focusedId = item.r.id;
    const x = this.scale.x(item.r.last);
    if (x < LABEL_WIDTH || x > this.width - RIGHT_PAD) {
      this.pan(x - (LABEL_WIDTH + this.width - RIGHT_PAD) / 2);
      this.position();
    }
    item.mark.focus({ preventScroll: false });
  }

  // neighbour is the drawn mark the arrow key moves to.
  neighbour(item, key) {
    const lane = this.byLane[item.lane].filter((it) => !it.hidden);
    const at = lane.indexOf(item);
    switch (key) {
      case 'ArrowRight':
        return lane[at + 1];
      case 'ArrowLeft':
        return at > 0 ? lane[at - 1] : null;
      case 'Home':
        return lane[0];
      case 'End':
        return lane[lane.length - 1];
      case 'ArrowDown':
      case 'ArrowUp': {
        const step = key === 'ArrowDown' ? 1 : -1;
        for (let i = item.lane + step; i >= 0 && i < this.byLane.length; i += step) {
          let best = null;
          for (const it of this.byLane[i]) {
            if (!it.hidden && (!best || Math.abs(it.r.last - item.r.last) < Math.abs(best.r.last - item.r.last))) best = it;
          }
          if (best) return best;
        }
        return null;
      }
    }
    return null;
  }

  listen() {
    const svg = this.svg;
    svg.addEventListener('pointerover', (e) => {
      const it = this.itemOf(e.target);
      if (it) this.showTip(it);
    });
    svg.addEventListener('pointerout', (e) => {
      if (this.itemOf(e.target) && document.activeElement !== e.target) this.hideTip();
    });
    svg.addEventListener('focusin', (e) => {
      const it = this.itemOf(e.target);
      this.hadFocus = !!it;
      if (it) {
        this.focusedId = it.r.id;
        this.setTabStop(it);
        this.showTip(it);
      }
    });
    svg.addEventListener('focusout', () => {
      this.hadFocus = false;
      this.hideTip();
    });
    svg.addEventListener('keydown', (e) => {
      const it = this.itemOf(e.target);
      const step = (this.scale.right - this.scale.left) / 8;
      const center = it ? this.scale.x(it.r.last) : undefined;
      if (e.shiftKey && (e.key === 'ArrowLeft' || e.key === 'ArrowRight')) {
        this.pan(e.key === 'ArrowLeft' ? -step : step);
      } else if (e.key === '+' || e.key === '=') {
        this.zoom(1.5, center);
      } else if (e.key === '-' || e.key === '_') {
        this.zoom(1 / 1.5, center);
      } else if (e.key === '0') {
        this.reset();
      } else if (e.key === 'Escape') {
        this.hideTip();
      } else if (it && ['ArrowRight', 'ArrowLeft', 'ArrowUp', 'ArrowDown', 'Home', 'End'].includes(e.key)) {
        this.focusItem(this.neighbour(it, e.key));
      } else {
        return;
      }
      e.preventDefault();
    });
    svg.addEventListener('wheel', (e) => {
      const rect = svg.getBoundingClientRect();
      const x = e.clientX - rect.left;
      if (!this.scale || x < LABEL_WIDTH) return;
      e.preventDefault();
      if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        this.pan(e.deltaX);
      } else {
        this.zoom(Math.pow(1.0015, -e.deltaY), x);
      }
    }, { passive: false });
    let drag = null;
    svg.addEventListener('pointerdown', (e) => {
      const rect = svg.getBoundingClientRect();
      if (e.button !== 0 || e.clientX - rect.left < LABEL_WIDTH) return;
      drag = { x: e.clientX, id: e.pointerId, moved: false };
    });
    svg.addEventListener('pointermove', (e) => {
      if (!drag || e.pointerId !== drag.id) return;
      const dx = e.clientX - drag.x;
      if (!drag.moved && Math.abs(dx) < 3) return;
      if (!drag.moved) svg.setPointerCapture(e.pointerId);
      drag.moved = true;
      drag.x = e.clientX;
      this.pan(-dx);
      svg.classList.add('dragging');
    });
    const end = () => {
      drag = null;
      svg.classList.remove('dragging');
    };
    svg.addEventListener('pointerup', end);
    svg.addEventListener('pointercancel', end);
    let resizing = 0;
    window.addEventListener('resize', () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => {
        if (this.lastDraw && this.wrap.isConnected) this.draw(...this.lastDraw);
      }, 150);
    });
  }
}

function setShown(e, shown) {
  if (e.shown === shown) return;
  e.shown = shown;
  if (shown) e.removeAttribute('display');
  else e.setAttribute('display', 'none');
}

function groupOf(apiVersion) {
  return apiVersion && apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
}

function truncate(s, n) {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
