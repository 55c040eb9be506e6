// The page's entry: reads what the command line asked for, and shows the
// view the URL's fragment names. A view is a module with a class taking
// (root, notices, config, query, params) and start()/stop(): the story of
// one object ('#story?kind=...&name=...'), or a namespace's or the
// cluster's Events over time ('#events?namespace=...'), which the page
// opens with when the command line named no object.

import { getJSON, ApiError } from './api.js';
import { StoryView } from './story.js';
import { EventsView } from './overview.js';

const views = {
  story: StoryView,
  events: EventsView,
};

let current = null;

function route(config) {
  const [name, search] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(search || '');
  // --cluster is where the page opens; from there the URL says.
  if (!location.hash && config.query.cluster) params.set('cluster', config.query.cluster);
  const View = views[name] || (config.query.kind ? views.story : views.events);
  let query = { ...config.query };
  if (views[name] && params.get('kind') && params.get('name')) {
    query = {
      kind: params.get('kind'),
      name: params.get('name'),
      group: params.get('group') || '',
      namespace: params.get('namespace') || '',
      allNamespaces: params.get('allNamespaces') === 'true',
      cluster: params.get('cluster') || '',
      tree: true,
    };
  }
  const events = document.getElementById('nav-events');
  const scope = new URLSearchParams(query.allNamespaces ? { allNamespaces: 'true' } : { namespace: query.namespace || '' });
  if (query.cluster) scope.set('cluster', query.cluster);
  events.href = `#events?${scope}`;
  events.hidden = View === views.events;
  if (current) current.stop();
  document.body.dataset.state = 'loading';
  document.getElementById('notices').replaceChildren();
  current = new View(document.getElementById('view'), document.getElementById('notices'), config, query, params);
  current.start();
}

async function main() {
  let config;
  try {
    config = await getJSON('api/config');
  } catch (e) {
    document.getElementById('subtitle').textContent = e instanceof ApiError ? e.message : String(e);
    document.body.dataset.state = 'error';
    return;
  }
  window.addEventListener('hashchange', () => route(config));
  route(config);
}

main();
