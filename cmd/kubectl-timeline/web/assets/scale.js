// A linear time scale: Unix milliseconds to pixels, zoomed and panned by
// the chart, with ticks at round local times.

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const STEPS = [
  SECOND, 5 * SECOND, 15 * SECOND, 30 * SECOND,
  MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE,
  HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, 7 * DAY, 30 * DAY,
];
// The narrowest view: one second across the chart.
const MIN_SPAN = SECOND;

export class TimeScale {
  constructor(start, end, left, right) {
    this.left = left;
    this.right = right;
    this.reset(start, end);
  }

  // reset shows [start, end] with a margin, so the first and last marks
  // are not cut by the edges.
  reset(start, end) {
    const span = Math.max(end - start, MIN_SPAN);
    const margin = span * 0.04;
    this.start = start - margin;
    this.end = start + span + margin;
    this.home = [this.start, this.end];
  }

  resize(left, right) {
    this.left = left;
    this.right = right;
  }

  x(t) {
    return this.left + ((t - this.start) * (this.right - this.left)) / (this.end - this.start);
  }

  t(x) {
    return this.start + ((x - this.left) * (this.end - this.start)) / (this.right - this.left);
  }

  // zoom by factor (> 1 in) around the time at pixel x.
  zoom(factor, x = (this.left + this.right) / 2) {
    const at = this.t(x);
    let start = at - (at - this.start) / factor;
    let end = at + (this.end - at) / factor;
    if (end - start < MIN_SPAN) {
      start = at - MIN_SPAN / 2;
      end = at + MIN_SPAN / 2;
    }
    this.start = start;
    this.end = end;
  }

  // pan by dx pixels (positive moves the view to later times).
  pan(dx) {
    const dt = (dx * (this.end - this.start)) / (this.right - this.left);
    this.start += dt;
    this.end += dt;
  }

  goHome() {
    [this.start, this.end] = this.home;
  }

  // ticks at a round step, about one per minSpacing pixels.
  ticks(minSpacing = 110) {
    const width = this.right - this.left;
    const wanted = (this.end - this.start) / Math.max(1, width / minSpacing);
    const step = STEPS.find((s) => s >= wanted) || STEPS[STEPS.length - 1];
    // Round in local time, so an hour tick sits on the hour where the
    // user is.
    const offset = new Date(this.start).getTimezoneOffset() * MINUTE;
    let t = Math.ceil((this.start - offset) / step) * step + offset;
    const out = [];
    let lastDay = '';
    for (; t <= this.end && out.length < 200; t += step) {
      const d = new Date(t);
      const day = d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
      let label = step >= DAY ? day : formatClock(d, step < MINUTE);
      if (step < DAY && day !== lastDay) label = `${day} ${label}`;
      lastDay = day;
      out.push({ t, label });
    }
    return out;
  }
}

function pad(n) {
  return String(n).padStart(2, '0');
}

function formatClock(d, seconds) {
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return seconds ? `${hm}:${pad(d.getSeconds())}` : hm;
}

// formatTime is a full local time, for tooltips and the table.
export function formatTime(ms) {
  if (!ms) return 'unknown';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${formatClock(d, true)}`;
}

// formatSpan is a duration as kubectl prints ages: 45s, 12m, 3h, 2d.
export function formatSpan(ms) {
  const s = Math.round(ms / SECOND);
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.round(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}
