// "Check my work" on the course's notebooks: the notebook as it is in the editor (unsaved changes included) goes
// to the user's own Jupyter server, which forwards it to the check service with its hub token
// (sdpa_check_my_work, beside this file); the answer is shown in a panel beside the notebook, in the notebook's
// language.
//
// Every word shown comes from the check service (its gettext catalogs) or from the answer itself; text is set
// with textContent only, never as HTML.
import { ToolbarButton } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

const COMMAND = 'sdpa-check:check-my-work';
const POLL_MS = 400;
const GIVE_UP_MS = 5 * 60 * 1000;

function api(path, init) {
  const settings = ServerConnection.makeSettings();
  const url = settings.baseUrl.replace(/\/$/, '') + '/sdpa-check/api/' + path;
  return ServerConnection.makeRequest(url, init || {}, settings);
}

async function json(response) {
  try {
    return await response.json();
  } catch (error) {
    return {};
  }
}

function assignmentOf(panel) {
  const name = panel.context.path.split('/').pop() || '';
  return name.replace(/\.ipynb$/, '');
}

const labelCache = new Map();

async function labelsFor(assignment) {
  if (!labelCache.has(assignment)) {
    labelCache.set(assignment, (async () => {
      const response = await api('labels?assignment=' + encodeURIComponent(assignment));
      return response.ok ? json(response) : null;
    })());
  }
  return labelCache.get(assignment);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined && text !== null) {
    node.textContent = String(text);
  }
  return node;
}

function fill(template, values) {
  return template.replace(/\{(\w+)\}/g, (match, key) => (key in values ? String(values[key]) : match));
}

class ResultPanel extends Widget {
  constructor() {
    super();
    this.id = 'sdpa-check-results';
    this.addClass('sdpa-check-panel');
    this.title.caption = 'Check my work';
    this.title.label = 'Check my work';
    this.title.closable = true;
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-live', 'polite');
  }

  show(labels, build) {
    this.title.label = labels.title;
    this.title.caption = labels.title;
    this.node.setAttribute('aria-label', labels.title);
    this.node.setAttribute('lang', labels.language === 'zh' ? 'zh-CN' : 'en');
    this.node.replaceChildren(element('h2', 'sdpa-check-title', labels.title));
    build(this.node);
  }

  message(labels, text, kind) {
    this.show(labels, node => node.appendChild(element('p', 'sdpa-check-' + (kind || 'note'), text)));
  }

  answer(labels, answer) {
    this.show(labels, node => {
      const failing = answer.parts.filter(part => !part.passes && !part.held).length;
      const summary = failing ? fill(labels.some_fail, { count: failing }) : labels.all_pass;
      node.appendChild(element('p', failing ? 'sdpa-check-summary sdpa-check-fails' : 'sdpa-check-summary', summary));
      if (answer.seconds !== undefined) {
        node.appendChild(element('p', 'sdpa-check-note', fill(labels.seconds, { seconds: answer.seconds })));
      }
      const list = element('ul', 'sdpa-check-parts');
      for (const part of answer.parts) {
        const item = element('li', 'sdpa-check-part');
        const head = element('div', 'sdpa-check-part-head');
        head.appendChild(element('code', null, part.part));
        const state = part.passes ? labels.passes : part.held ? labels.held : labels.needs_work;
        const badge = part.passes ? 'pass' : part.held ? 'held' : 'fail';
        head.appendChild(element('span', 'sdpa-check-badge sdpa-check-' + badge, state));
        if (part.points !== undefined) {
          head.appendChild(element('span', 'sdpa-check-points',
            fill(labels.points, { points: part.points, max_points: part.max_points })));
        }
        item.appendChild(head);
        for (const mistake of part.mistakes || []) {
          const box = element('div', 'sdpa-check-mistake');
          box.appendChild(element('code', 'sdpa-check-code', '[' + mistake.code + ']'));
          if (mistake.explanation) {
            box.appendChild(element('p', null, mistake.explanation));
          }
          if (mistake.hint) {
            const hint = element('p', 'sdpa-check-hint');
            hint.appendChild(element('strong', null, labels.hint + ': '));
            hint.appendChild(document.createTextNode(mistake.hint));
            box.appendChild(hint);
          }
          item.appendChild(box);
        }
        for (const check of part.checks || []) {
          if (check.message) {
            item.appendChild(element('p', 'sdpa-check-message', check.message));
          }
          const rows = Object.entries(check.example || {});
          if (rows.length) {
            const example = element('details', 'sdpa-check-example');
            example.appendChild(element('summary', null, labels.example));
            for (const [label, text] of rows) {
              example.appendChild(element('div', 'sdpa-check-example-label', label));
              example.appendChild(element('pre', null, text));
            }
            item.appendChild(example);
          }
        }
        list.appendChild(item);
      }
      node.appendChild(list);
    });
  }
}

async function check(app, panel, results) {
  const assignment = assignmentOf(panel);
  const labels = await labelsFor(assignment);
  if (!labels) {
    return;
  }
  if (!results.isAttached) {
    // beside the notebook, as JupyterLab opens a notebook's contextual help or a console
    app.shell.add(results, 'main', { mode: 'split-right', ref: panel.id });
  }
  app.shell.activateById(results.id);
  results.message(labels, labels.grading);
  // without outputs: the check runs the code again, and a notebook's plots are most of its size (the service
  // takes 2 MiB)
  const notebook = panel.context.model.toJSON();
  notebook.cells = (notebook.cells || []).map(cell =>
    cell.cell_type === 'code' ? { ...cell, outputs: [], execution_count: null } : cell);
  const query = 'check?assignment=' + encodeURIComponent(assignment);
  let response = await api(query, { method: 'POST', body: JSON.stringify({ assignment, notebook }) });
  let body = await json(response);
  const started = Date.now();
  while (response.ok && (body.state === 'waiting' || body.state === 'grading')) {
    results.message(labels, body.state === 'waiting' ? fill(labels.waiting, { place: body.place }) : labels.grading);
    if (Date.now() - started > GIVE_UP_MS) {
      results.message(labels, labels.no_answer, 'error');
      return;
    }
    await new Promise(resolve => setTimeout(resolve, POLL_MS));
    response = await api('check?assignment=' + encodeURIComponent(assignment));
    body = await json(response);
  }
  if (response.ok && body.state === 'answered') {
    results.answer(labels, body);
  } else {
    const tooLarge = body.too_large_mib ? fill(labels.too_large, { limit: body.too_large_mib }) : null;
    results.message(labels, body.message || tooLarge || labels.no_answer, 'error');
  }
}

const plugin = {
  id: 'sdpa-check-my-work:plugin',
  description: 'Check my work: the grader\'s diagnosis while working, from the course\'s check service',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app, tracker) => {
    const results = new ResultPanel();
    app.commands.addCommand(COMMAND, {
      label: 'Check my work',
      isEnabled: () => tracker.currentWidget !== null,
      execute: () => {
        const panel = tracker.currentWidget;
        return panel ? check(app, panel, results) : undefined;
      }
    });
    tracker.widgetAdded.connect(async (sender, panel) => {
      await panel.context.ready;
      const labels = await labelsFor(assignmentOf(panel));
      if (!labels || panel.isDisposed) {
        return;  // not one of the course's notebooks, or no check service here
      }
      const button = new ToolbarButton({
        className: 'sdpa-check-button',
        label: labels.button,
        tooltip: labels.tooltip,
        onClick: () => void check(app, panel, results)
      });
      panel.toolbar.insertItem(10, 'sdpa-check-my-work', button);
    });
  }
};

export default plugin;
