// The story's model: Events by id, each at its newest version (as the
// terminal timeline keeps them), and the lanes they fall in: one per
// incarnation (uid) of the object, then the objects it owns, under it.

export class Model {
  constructor(story, watching) {
    this.story = story;
    this.query = story.query;
    this.watching = watching;
    this.records = new Map();
    for (const r of story.records) this.records.set(r.id, r);
    this.objects = new Map(story.objects.filter((o) => o.uid).map((o) => [o.uid, o]));
    // Lanes first seen through the watch: an incarnation created while
    // the page was open.
    this.known = new Set(story.records.map(laneKey));
    this.bornLater = new Set();
  }

  // add keeps r when it is a newer version of its Event, or the same
  // version with the Event's end now known; it says whether it did.
  add(r) {
    const old = this.records.get(r.id);
    if (old && (r.version < old.version || (r.version === old.version && (old.ended || !r.ended)))) return false;
    this.records.set(r.id, r);
    const key = laneKey(r);
    if (!this.known.has(key)) {
      this.known.add(key);
      this.bornLater.add(key);
    }
    return true;
  }

  get size() {
    return this.records.size;
  }

  isRoot(kind, name) {
    return kind === this.query.kind && name === this.query.name;
  }

  // lanes are the object's incarnations, oldest first, each followed by
  // what it owns (depth first), then any other lane.
  lanes() {
    const lanes = new Map();
    const lane = (key, init) => {
      if (!lanes.has(key)) lanes.set(key, { key, records: [], first: Infinity, last: -Infinity, owner: '', ...init });
      return lanes.get(key);
    };
    for (const o of this.story.objects) {
      if (!o.uid) continue;
      lane(o.uid, { uid: o.uid, kind: o.kind, name: o.name, namespace: o.namespace, apiVersion: o.apiVersion, owner: o.owner || '' });
    }
    for (const r of this.records.values()) {
      const l = lane(laneKey(r), { uid: r.uid, kind: r.kind, name: r.object, namespace: r.namespace, apiVersion: r.apiVersion });
      l.records.push(r);
      l.first = Math.min(l.first, r.first);
      l.last = Math.max(l.last, r.last);
    }
    for (const l of lanes.values()) l.records.sort((a, b) => a.last - b.last || a.version - b.version);

    const roots = [...lanes.values()].filter((l) => !l.owner && this.isRoot(l.kind, l.name));
    // An object with no Events yet is the newest incarnation.
    roots.sort((a, b) => a.first - b.first || a.namespace.localeCompare(b.namespace));
    const children = new Map();
    for (const l of lanes.values()) {
      if (!l.owner) continue;
      if (!children.has(l.owner)) children.set(l.owner, []);
      children.get(l.owner).push(l);
    }
    const out = [];
    const seen = new Set();
    const visit = (l, depth) => {
      if (seen.has(l.key)) return;
      seen.add(l.key);
      l.depth = depth;
      l.state = this.state(l, roots);
      out.push(l);
      const owned = (children.get(l.uid) || []).sort((a, b) => a.kind.localeCompare(b.kind) || a.name.localeCompare(b.name));
      for (const c of owned) visit(c, depth + 1);
    };
    for (const l of roots) visit(l, 0);
    for (const l of lanes.values()) visit(l, 0);
    return out;
  }

  // state says whether the incarnation still exists: "exists" where the
  // cluster says so, "deleted" where a newer one of the same name replaced
  // it or the cluster has it no more, "new" for one first seen while
  // following, and "unknown" where the cluster could not be asked.
  state(l, roots) {
    if (!l.owner && this.isRoot(l.kind, l.name)) {
      const replaced = roots.some((o) => o !== l && o.namespace === l.namespace && o.first > l.first && o.first !== Infinity);
      const replacedByObject = roots.some((o) => o !== l && o.namespace === l.namespace && this.objects.has(o.uid));
      if (replaced || (replacedByObject && !this.objects.has(l.uid))) return 'deleted';
    }
    if (this.objects.has(l.uid)) return 'exists';
    if (this.bornLater.has(l.key)) return 'new';
    if (this.story.lookup.available) return 'deleted';
    return 'unknown';
  }
}

export function laneKey(r) {
  return r.uid || `${r.kind}/${r.namespace}/${r.object}`;
}

export const STATE_TEXT = {
  exists: 'exists',
  deleted: 'deleted',
  new: 'new, appeared while following',
  unknown: 'existence unknown',
};
