// The rules editor: the database's rules document as uploaded (comments kept), checked or
// saved by the server, whose refusals name a line and a column; the editor marks that line.

const $ = (id) => document.getElementById(id);

/** `line L, column C: reason`, the form of every refusal of a rules document. */
const POSITION = /^line (\d+), column (\d+): /;

export function errorPosition(message) {
  const found = POSITION.exec(message);
  return found ? { line: Number(found[1]), column: Number(found[2]) } : null;
}

export class RulesEditor {
  /**
   * @param {{ns: () => string | null, api: () => import('./api.js').Api}} context
   */
  constructor(context) {
    this.context = context;
    this.text = $('rules-text');
    this.gutter = $('rules-gutter');
    this.band = $('rules-band');
    this.errorLine = 0;
    this.lines = 0;
    this.text.addEventListener('input', () => {
      this.clearError();
      this.drawGutter();
    });
    this.text.addEventListener('scroll', () => this.follow());
    $('rules-load').addEventListener('click', () => this.load());
    $('rules-check').addEventListener('click', () => this.submit(false));
    $('rules-save').addEventListener('click', () => this.submit(true));
  }

  status(text) {
    $('rules-status').textContent = text;
  }

  async load() {
    const ns = this.context.ns();
    if (!ns) return;
    this.clearError();
    this.status('loading…');
    try {
      this.text.value = await this.context.api().rules(ns);
      this.status(`rules of ${ns}`);
    } catch (error) {
      this.status('');
      this.showError(error.message);
    }
    this.drawGutter();
  }

  /** Checks the document on the server, and with `save` installs it. */
  async submit(save) {
    const ns = this.context.ns();
    if (!ns) return;
    this.clearError();
    this.status(save ? 'saving…' : 'checking…');
    try {
      const api = this.context.api();
      if (save) await api.saveRules(ns, this.text.value);
      else await api.checkRules(this.text.value);
      this.status(save ? `saved; ${ns} uses these rules now` : 'the rules are valid');
    } catch (error) {
      this.status('');
      this.showError(error.message);
    }
  }

  showError(message) {
    $('rules-error').textContent = message;
    const at = errorPosition(message);
    if (!at) return;
    this.errorLine = at.line;
    this.drawGutter();
    // Put the caret on the spot, and scroll the line into view.
    const lines = this.text.value.split('\n');
    let offset = 0;
    for (let i = 0; i < Math.min(at.line - 1, lines.length); i++) offset += lines[i].length + 1;
    offset += Math.max(0, at.column - 1);
    this.text.focus();
    this.text.setSelectionRange(offset, offset);
    const lineHeight = this.lineHeight();
    const top = (at.line - 1) * lineHeight;
    if (top < this.text.scrollTop || top > this.text.scrollTop + this.text.clientHeight - lineHeight) {
      this.text.scrollTop = Math.max(0, top - this.text.clientHeight / 2);
    }
    this.follow();
  }

  clearError() {
    if (!this.errorLine && !$('rules-error').textContent) return;
    $('rules-error').textContent = '';
    this.errorLine = 0;
    this.drawGutter();
  }

  lineHeight() {
    return parseFloat(getComputedStyle(this.text).lineHeight) || 18;
  }

  /** One number per line, the refused line marked. */
  drawGutter() {
    const count = this.text.value.split('\n').length;
    if (count !== this.lines || this.gutter.querySelector('.error') || this.errorLine) {
      const rows = [];
      for (let line = 1; line <= count; line++) {
        const row = document.createElement('div');
        row.textContent = String(line);
        row.dataset.line = String(line);
        if (line === this.errorLine) row.className = 'error';
        rows.push(row);
      }
      this.gutter.replaceChildren(...rows);
      this.lines = count;
    }
    this.follow();
  }

  /** Keeps the gutter and the error band level with the text as it scrolls. */
  follow() {
    this.gutter.scrollTop = this.text.scrollTop;
    if (!this.errorLine) {
      this.band.hidden = true;
      return;
    }
    const padding = parseFloat(getComputedStyle(this.text).paddingTop) || 0;
    this.band.hidden = false;
    this.band.style.top = `${padding + (this.errorLine - 1) * this.lineHeight() - this.text.scrollTop}px`;
    this.band.style.height = `${this.lineHeight()}px`;
  }
}
