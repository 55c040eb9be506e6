// Small DOM helpers the views share.

import { ApiError } from './api.js';

export function div(className, parent) {
  const d = document.createElement('div');
  if (className) d.className = className;
  if (parent) parent.appendChild(d);
  return d;
}

export function button(text, onClick, parent) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.addEventListener('click', onClick);
  parent.appendChild(b);
  return b;
}

export function notice(parent, kind, lead, text) {
  const p = document.createElement('p');
  p.className = `notice ${kind}`;
  if (lead) {
    const b = document.createElement('strong');
    b.textContent = lead;
    p.appendChild(b);
  }
  p.append(text);
  parent.appendChild(p);
  return p;
}

// errorBox shows an API's Status as it said it: the cluster's own code,
// reason and message (a 403 names the user, the verb and the resource).
export function errorBox(parent, e, fallback) {
  const status = e instanceof ApiError ? e.status : { code: 0, reason: '', message: String(e) };
  const box = div('error', parent);
  box.setAttribute('role', 'alert');
  const h = document.createElement('h2');
  h.textContent = status.code ? `The cluster answered ${status.code}${status.reason ? ` ${status.reason}` : ''}` : fallback;
  const p = document.createElement('p');
  p.className = 'message';
  p.textContent = status.message;
  box.append(h, p);
  return box;
}

// plural is n and its noun, in the plural unless n is one.
export function plural(n, noun) {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

const SVG = 'http://www.w3.org/2000/svg';

// el makes an SVG element with attrs, appended to parent where given.
export function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

// chartFrame is a drawing's frame in container: a wrapper, the SVG of
// class svgClass and a hidden tooltip of id tooltipId that the focused or
// hovered item describes itself by.
export function chartFrame(container, svgClass, tooltipId) {
  const wrap = document.createElement('div');
  wrap.className = 'chart-wrap';
  container.appendChild(wrap);
  const svg = el('svg', { class: svgClass, role: 'group' }, wrap);
  const tooltip = document.createElement('div');
  tooltip.className = 'tooltip';
  tooltip.id = tooltipId;
  tooltip.setAttribute('role', 'tooltip');
  tooltip.hidden = true;
  wrap.appendChild(tooltip);
  return { wrap, svg, tooltip };
}

// helpBox lists a view's keyboard and mouse help, folded, in root.
export function helpBox(root, lines) {
  const help = document.createElement('details');
  help.className = 'help';
  const summary = document.createElement('summary');
  summary.textContent = 'Keyboard and mouse';
  const list = document.createElement('ul');
  for (const line of lines) {
    const li = document.createElement('li');
    li.textContent = line;
    list.appendChild(li);
  }
  help.append(summary, list);
  root.appendChild(help);
}
