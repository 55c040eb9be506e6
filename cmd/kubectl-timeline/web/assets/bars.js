// Stacked bars: one bar per time bucket, a segment per group (reason or
// type) and one for the rest ("other"), the largest group at the bottom.
// Each segment is reachable with the keyboard (arrow keys, Home, End),
// says what it is on hover and focus, and opens its objects on click,
// Enter or Space. Colours come from a palette for colour-vision
// deficiencies (Okabe and Ito), "other" is grey and hatched, and the
// legend and table name every group, so no segment rests on colour alone.

import { formatTime } from './scale.js';
import { plural, el, chartFrame } from './dom.js';

const LEFT = 56;
const RIGHT = 16;
const TOP = 12;
const PLOT_HEIGHT = 240;
const AXIS = 44;

export const PALETTE = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00', '#f0e442', '#882255'];
const TYPE_COLOURS = { Normal: '#2563eb', Warning: '#f59e0b' };
export const OTHER_COLOUR = '#c4c9d0';

// colour of group i of a count by `by`.
export function groupColour(by, value, i) {
  if (by === 'type') return TYPE_COLOURS[value] || '#6b7280';
  return PALETTE[i % PALETTE.length];
}

// groupLabel spells an empty value as kubectl does.
export function groupLabel(value) {
  return value === '' ? '<none>' : value;
}

// bucketLabel is a bucket's span in words.
export function bucketSpan(counts, start) {
  const from = Math.max(start, counts.since);
  return `${formatTime(from)} to ${formatTime(start + counts.bucket)}`;
}

// segments lists a count's non-empty segments, bucket by bucket, bottom up.
export function segments(counts) {
  const out = [];
  counts.buckets.forEach((b, bi) => {
    let below = 0;
    b.counts.forEach((n, gi) => {
      if (n > 0) out.push({ bucket: bi, group: gi, start: b.start, n, below });
      below += n;
    });
    if (b.other > 0) out.push({ bucket: bi, group: -1, start: b.start, n: b.other, below });
  });
  return out;
}

function niceStep(max) {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return Math.max(1, m * mag);
  return mag * 10;
}

export class Bars {
  // onOpen(segment) drills into a segment's objects.
  constructor(container, { onOpen }) {
    this.container = container;
    this.onOpen = onOpen;
    ({ wrap: this.wrap, svg: this.svg, tooltip: this.tooltip } = chartFrame(container, 'bars', 'segment-tooltip'));
    this.items = [];
    this.focused = null;
    this.listen();
  }

  describe(s) {
    const c = this.counts;
    const name = s.group < 0 ? 'Other' : groupLabel(c.groups[s.group].value);
    return `${name}, ${bucketSpan(c, s.start)}: ${plural(s.n, 'Event version')}`;
  }

  draw(counts, summary) {
    this.counts = counts;
    const width = Math.max(600, this.wrap.clientWidth || 960);
    const height = TOP + PLOT_HEIGHT + AXIS;
    const svg = this.svg;
    svg.replaceChildren();
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('aria-label', summary);
    const defs = el('defs', {}, svg);
    const hatch = el('pattern', { id: 'other-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' }, defs);
    el('rect', { width: 6, height: 6, fill: OTHER_COLOUR }, hatch);
    el('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#8b929a', 'stroke-width': 2 }, hatch);

    const n = Math.max(1, counts.buckets.length);
    const slot = (width - LEFT - RIGHT) / n;
    const barWidth = Math.max(2, slot * 0.78);
    let max = 0;
    for (const b of counts.buckets) max = Math.max(max, b.counts.reduce((a, x) => a + x, 0) + b.other);
    const step = niceStep(max);
    const top = Math.max(step, Math.ceil(max / step) * step);
    const y = (v) => TOP + PLOT_HEIGHT - (v * PLOT_HEIGHT) / top;

    const axis = el('g', { class: 'axis', 'aria-hidden': 'true' }, svg);
    for (let v = 0; v <= top; v += step) {
      el('line', { x1: LEFT, x2: width - RIGHT, y1: y(v), y2: y(v), class: v ? 'grid' : 'axis-line' }, axis);
      const t = el('text', { x: LEFT - 8, y: y(v) + 4, class: 'tick y' }, axis);
      t.textContent = String(v);
    }
    const every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor((width - LEFT - RIGHT) / 90))));
    counts.buckets.forEach((b, i) => {
      if (i % every) return;
      const t = el('text', { x: LEFT + slot * i + slot / 2, y: TOP + PLOT_HEIGHT + 18, class: 'tick' }, axis);
      t.textContent = tickLabel(b.start, counts.bucket);
    });

    const plot = el('g', { class: 'segments' }, svg);
    this.items = segments(counts).map((s) => {
      const x = LEFT + slot * s.bucket + (slot - barWidth) / 2;
      const fill = s.group < 0 ? 'url(#other-hatch)' : groupColour(counts.by, counts.groups[s.group].value, s.group);
      const rect = el('rect', {
        x, y: y(s.below + s.n), width: barWidth, height: Math.max(1, y(s.below) - y(s.below + s.n)),
        fill, class: s.group < 0 ? 'seg other' : 'seg',
        tabindex: '-1', role: 'button',
        'data-bucket': s.bucket, 'data-group': s.group, 'data-count': s.n, 'data-start': s.start,
      }, plot);
      rect.setAttribute('aria-label', this.describe(s));
      return { ...s, rect };
    });
    const keep = this.focused && this.items.find((it) => it.bucket === this.focused.bucket && it.group === this.focused.group);
    this.setTabStop(keep || this.items[0] || null);
    if (!this.items.length) {
      const t = el('text', { x: (LEFT + width) / 2, y: TOP + PLOT_HEIGHT / 2, class: 'empty' }, svg);
      t.textContent = 'No Events in this window';
    }
  }

  setTabStop(item) {
    for (const it of this.items) it.rect.setAttribute('tabindex', it === item ? '0' : '-1');
    this.focused = item;
  }

  focusItem(item) {
    if (!item) return;
    this.setTabStop(item);
    item.rect.focus();
    this.show(item);
  }

  show(item) {
    const tip = this.tooltip;
    tip.textContent = this.describe(item);
    tip.hidden = false;
    const box = item.rect.getBBox();
    tip.style.left = `${Math.min(box.x + box.width + 8, this.wrap.clientWidth - 300)}px`;
    tip.style.top = `${Math.max(0, box.y - 8)}px`;
  }

  hide() {
    this.tooltip.hidden = true;
  }

  // neighbour is the segment a key moves to from it.
  neighbour(it, key) {
    const items = this.items;
    const inBucket = (b) => items.filter((x) => x.bucket === b);
    const buckets = [...new Set(items.map((x) => x.bucket))];
    const bi = buckets.indexOf(it.bucket);
    const near = (b) => {
      const list = inBucket(b);
      return list.find((x) => x.group === it.group) || list[Math.min(list.length - 1, list.findIndex((x) => x.group === -1 || x.group > it.group))] || list[0];
    };
    const stack = inBucket(it.bucket);
    const si = stack.indexOf(it);
    switch (key) {
      case 'ArrowLeft': return bi > 0 ? near(buckets[bi - 1]) : it;
      case 'ArrowRight': return bi < buckets.length - 1 ? near(buckets[bi + 1]) : it;
      case 'ArrowUp': return stack[Math.min(stack.length - 1, si + 1)];
      case 'ArrowDown': return stack[Math.max(0, si - 1)];
      case 'Home': return near(buckets[0]);
      case 'End': return near(buckets[buckets.length - 1]);
    }
    return null;
  }

  listen() {
    const find = (target) => this.items.find((it) => it.rect === target);
    this.svg.addEventListener('click', (e) => {
      const it = find(e.target);
      if (it) {
        this.setTabStop(it);
        this.onOpen(it);
      }
    });
    this.svg.addEventListener('mouseover', (e) => {
      const it = find(e.target);
      if (it) this.show(it);
    });
    this.svg.addEventListener('mouseout', () => this.hide());
    this.svg.addEventListener('focusin', (e) => {
      const it = find(e.target);
      if (it) {
        this.setTabStop(it);
        this.show(it);
      }
    });
    this.svg.addEventListener('focusout', () => this.hide());
    this.svg.addEventListener('keydown', (e) => {
      const it = find(e.target);
      if (!it) return;
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        this.onOpen(it);
        return;
      }
      const next = this.neighbour(it, e.key);
      if (next) {
        e.preventDefault();
        this.focusItem(next);
      }
    });
  }
}

function pad(n) {
  return String(n).padStart(2, '0');
}

function tickLabel(ms, bucket) {
  const d = new Date(ms);
  const day = d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
  if (bucket >= 24 * 3600e3) return day;
  const clock = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return d.getHours() === 0 && d.getMinutes() === 0 ? day : clock;
}
