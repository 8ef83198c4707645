// The wophost console's script: it asks the host for each page's content
// with the tab's bearer token, signs in, and replays runs. Every piece of
// HTML it inserts was rendered and escaped by the host; it builds no
// markup from data itself.
'use strict';

(function () {
  const KEY = 'wophost.console.token';
  const view = document.getElementById('view');
  const signIn = document.getElementById('sign-in');
  const signInForm = document.getElementById('sign-in-form');
  const signInProblem = document.getElementById('sign-in-problem');
  const signOut = document.getElementById('sign-out');
  let refreshTimer = 0;

  // The token lives in this tab's session storage only.
  function token() {
    try {
      return sessionStorage.getItem(KEY) || '';
    } catch (e) {
      return '';
    }
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) {
      h.Authorization = 'Bearer ' + t;
    }
    return h;
  }

  // The content of the page at this address lives at /ui/view/ and the
  // same path.
  function viewAddress() {
    const rest = location.pathname.slice('/ui/'.length);
    return '/ui/view/' + rest + location.search;
  }

  function markNavigation() {
    const first = location.pathname.slice('/ui/'.length).split('/')[0];
    for (const a of document.querySelectorAll('nav a[data-nav]')) {
      if (a.dataset.nav === first) {
        a.setAttribute('aria-current', 'page');
      } else {
        a.removeAttribute('aria-current');
      }
    }
  }

  function showText(title, message) {
    const section = document.createElement('section');
    section.className = 'page';
    const h1 = document.createElement('h1');
    h1.textContent = title;
    const p = document.createElement('p');
    p.className = 'problem';
    p.setAttribute('role', 'alert');
    p.textContent = message;
    section.append(h1, p);
    view.replaceChildren(section);
    document.title = title + ' · wophost console';
  }

  function showSignIn(problem) {
    clearTimeout(refreshTimer);
    view.replaceChildren();
    view.hidden = true;
    signIn.hidden = false;
    signOut.hidden = true;
    signInProblem.hidden = !problem;
    signInProblem.textContent = problem || '';
    document.title = 'Sign in · wophost console';
    document.getElementById('token').focus();
  }

  async function load(refreshing) {
    clearTimeout(refreshTimer);
    let res;
    try {
      res = await fetch(viewAddress(), {
        headers: authHeaders({ Accept: 'text/html' }),
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (e) {
      if (!refreshing) {
        showText('The host did not answer', String(e.message || e));
      }
      refreshTimer = setTimeout(() => load(true), 5000);
      return;
    }
    if (res.status === 401) {
      showSignIn(token() ? 'The host did not accept that token.' : '');
      return;
    }
    signIn.hidden = true;
    view.hidden = false;
    signOut.hidden = !token();
    const type = res.headers.get('Content-Type') || '';
    if (!type.startsWith('text/html')) {
      let message = res.status + ' ' + res.statusText;
      try {
        const body = await res.json();
        message = (body.error && body.error.message) || message;
      } catch (e) {
        // Not JSON either: the status says enough.
      }
      showText('This page cannot be shown', message);
      return;
    }
    const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
    const focused = document.activeElement && document.activeElement.id;
    view.replaceChildren(...doc.body.childNodes);
    const section = view.querySelector('[data-title]');
    document.title = (section ? section.dataset.title + ' · ' : '') + 'wophost console';
    bind();
    if (refreshing && focused) {
      const again = document.getElementById(focused);
      if (again) {
        again.focus();
      }
    }
    const every = section && Number(section.dataset.refresh);
    if (every > 0) {
      refreshTimer = setTimeout(() => {
        if (document.visibilityState === 'visible') {
          load(true);
        } else {
          document.addEventListener('visibilitychange', () => load(true), { once: true });
        }
      }, every * 1000);
    }
  }

  // bind wires the buttons of the content just inserted.
  function bind() {
    for (const button of view.querySelectorAll('button[data-replay]')) {
      button.addEventListener('click', () => replay(button));
    }
  }

  // replay asks the API to replay a run, then shows the replay beside it.
  async function replay(button) {
    const runId = button.dataset.replay;
    const status = document.getElementById('replay-status');
    button.disabled = true;
    status.textContent = 'Replaying…';
    try {
      const res = await fetch('/v1/runs/' + encodeURIComponent(runId) + ':replay', {
        method: 'POST',
        headers: authHeaders({ 'Content-Type': 'application/json', Accept: 'application/json' }),
        body: '{}',
        credentials: 'omit',
        cache: 'no-store',
      });
      if (res.status === 401) {
        showSignIn('The host did not accept that token.');
        return;
      }
      const body = await res.json();
      if (body.runId) {
        location.assign('/ui/runs/' + encodeURIComponent(runId) + '?beside=' + encodeURIComponent(body.runId));
        return;
      }
      status.textContent = 'The replay was refused: ' + ((body.error && body.error.message) || res.status);
    } catch (e) {
      status.textContent = 'The replay failed: ' + String(e.message || e);
    }
    button.disabled = false;
  }

  signInForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const input = document.getElementById('token');
    try {
      sessionStorage.setItem(KEY, input.value.trim());
    } catch (e) {
      signInProblem.hidden = false;
      signInProblem.textContent = 'This browser keeps nothing for the tab: ' + String(e.message || e);
      return;
    }
    input.value = '';
    load(false);
  });

  signOut.addEventListener('click', () => {
    try {
      sessionStorage.removeItem(KEY);
    } catch (e) {
      // Nothing was kept.
    }
    showSignIn('');
  });

  markNavigation();
  load(false);
})();
