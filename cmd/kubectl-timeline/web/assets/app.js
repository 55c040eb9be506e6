// The page's entry: reads what the command line asked for, and shows the
// view the URL's fragment names. A view is a module with a class taking
// (root, notices, config, query) and start()/stop(); the story of one
// object is the first. A cluster's or namespace's Events over time is
// meant to be another, '#events?namespace=...', once the server answers
// counts and text search.

import { getJSON, ApiError } from './api.js';
import { StoryView } from './story.js';

const views = {
  story: StoryView,
};

let current = null;

function route(config) {
  const [name, search] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(search || '');
  const View = views[name] || views.story;
  let query = { ...config.query };
  if (views[name] && params.get('kind') && params.get('name')) {
    query = {
      kind: params.get('kind'),
      name: params.get('name'),
      group: params.get('group') || '',
      namespace: params.get('namespace') || '',
      allNamespaces: params.get('allNamespaces') === 'true',
      tree: true,
    };
  }
  if (current) current.stop();
  document.body.dataset.state = 'loading';
  current = new View(document.getElementById('view'), document.getElementById('notices'), config, query);
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
