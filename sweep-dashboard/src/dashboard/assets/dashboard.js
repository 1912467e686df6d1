// sweep dashboard: Pareto charts of tok/s/GPU against interactivity and latency, drawn as SVG
// from /api/config/<key>. Stored strings only ever reach the page as text (textContent and
// attribute values), never as markup.
'use strict';
(function () {
  const SVG = 'http://www.w3.org/2000/svg';
  const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];
  // Runs shown when the page names none: the newest few, so a config with hundreds of runs
  // opens readable.
  const DEFAULT_SHOWN = 5;
  const NORTH_STAR = 'e2e_norm_intvty_p90';

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function fmt(x) {
    if (x === null || x === undefined || !Number.isFinite(x)) return '-';
    const a = Math.abs(x);
    if (a >= 1000) return Math.round(x).toLocaleString('en-US');
    if (a >= 10) return x.toFixed(1);
    return x.toFixed(3);
  }

  function fmtTick(x) {
    const a = Math.abs(x);
    if (a >= 1e6) return +(x / 1e6).toPrecision(3) + 'M';
    if (a >= 1e3) return +(x / 1e3).toPrecision(3) + 'k';
    if (a === 0) return '0';
    return String(+x.toPrecision(3));
  }

  function when(unix) {
    if (!unix) return '-';
    return new Date(unix * 1000).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  }

  function withCi(v) {
    if (!v || v.value === null || v.value === undefined) return '-';
    let s = fmt(v.value);
    if (Number.isFinite(v.lo) && Number.isFinite(v.hi)) s += '  [' + fmt(v.lo) + ' – ' + fmt(v.hi) + ']';
    return s;
  }

  function shortId(id) {
    const i = id.lastIndexOf('/');
    return i >= 0 ? id.slice(i + 1) : id;
  }

  // A scale from a data domain to pixels; log when asked, or when 'auto' and the values span
  // more than 20x (one curve would otherwise squash another into a corner).
  function scale(lo, hi, mode, p0, p1) {
    // A log axis needs positive values; without any, the axis stays linear.
    const log = lo > 0 && Number.isFinite(lo) && (mode === 'log' || (mode === 'auto' && hi / lo > 20));
    if (log) {
      const a = Math.log10(lo), b = Math.log10(hi);
      const pad = Math.max((b - a) * 0.06, 0.05);
      const d0 = a - pad, d1 = b + pad;
      const f = (x) => p0 + ((Math.log10(x) - d0) / (d1 - d0)) * (p1 - p0);
      f.log = true;
      f.ticks = () => logTicks(Math.pow(10, d0), Math.pow(10, d1));
      return f;
    }
    let pad = (hi - lo) * 0.06;
    if (pad === 0) pad = Math.abs(hi) * 0.1 || 1;
    const d0 = lo >= 0 && lo - pad < 0 ? 0 : lo - pad, d1 = hi + pad;
    const f = (x) => p0 + ((x - d0) / (d1 - d0)) * (p1 - p0);
    f.log = false;
    f.ticks = () => linearTicks(d0, d1);
    return f;
  }

  function linearTicks(a, b) {
    const raw = (b - a) / 6;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let t = Math.ceil(a / step) * step; t <= b + step * 1e-9; t += step) out.push(+t.toPrecision(12));
    return out;
  }

  function logTicks(a, b) {
    const out = [];
    const decades = Math.log10(b / a);
    const mults = decades <= 2 ? [1, 2, 5] : [1];
    for (let e = Math.floor(Math.log10(a)); e <= Math.ceil(Math.log10(b)); e++) {
      for (const m of mults) {
        const t = m * Math.pow(10, e);
        if (t >= a && t <= b) out.push(t);
      }
    }
    return out;
  }

  class ChartApp {
    constructor(root, data) {
      this.root = root;
      this.data = data;
      this.view = NORTH_STAR;
      this.xmode = 'auto';
      this.ymode = 'auto';
      this.kinds = { measured: true, predicted: true };
      this.baseline = root.dataset.baseline || '';
      let wanted = [];
      try {
        wanted = JSON.parse(root.dataset.runs || '[]');
      } catch (e) {
        wanted = [];
      }
      const idx = data.runs.map((r, i) => (wanted.includes(r.id) ? i : -1)).filter((i) => i >= 0);
      this.shown = new Set(idx.length ? idx : data.runs.slice(0, DEFAULT_SHOWN).map((r, i) => i));
    }

    colour(run) {
      return PALETTE[run % PALETTE.length];
    }

    build() {
      const root = this.root;
      root.replaceChildren();
      const controls = el('div', { class: 'controls' });
      const views = el('div', { class: 'views', role: 'group', 'aria-label': 'x axis' });
      this.viewButtons = this.data.views.map((v) => {
        const b = el('button', { type: 'button', 'data-view': v.key, title: v.label }, v.short);
        b.addEventListener('click', () => {
          this.view = v.key;
          this.draw();
        });
        views.appendChild(b);
        return b;
      });
      controls.appendChild(views);
      const modes = el('div', { class: 'modes' });
      const modeSelect = (label, get, set) => {
        const l = el('label', {}, label + ' ');
        const s = el('select');
        for (const m of ['auto', 'linear', 'log']) {
          const o = el('option', { value: m }, m);
          if (m === get()) o.selected = true;
          s.appendChild(o);
        }
        s.addEventListener('change', () => {
          set(s.value);
          this.draw();
        });
        l.appendChild(s);
        return l;
      };
      modes.appendChild(modeSelect('x scale', () => this.xmode, (m) => (this.xmode = m)));
      modes.appendChild(modeSelect('y scale', () => this.ymode, (m) => (this.ymode = m)));
      for (const k of ['measured', 'predicted']) {
        const l = el('label', { class: 'kind' });
        const c = el('input', { type: 'checkbox' });
        c.checked = this.kinds[k];
        c.addEventListener('change', () => {
          this.kinds[k] = c.checked;
          this.draw();
        });
        l.appendChild(c);
        l.appendChild(document.createTextNode(' ' + k));
        modes.appendChild(l);
      }
      controls.appendChild(modes);
      root.appendChild(controls);

      const wrap = el('div', { class: 'chart-wrap' });
      this.svg = sv('svg', { class: 'chart', role: 'img' });
      this.tip = el('div', { class: 'tooltip', role: 'tooltip' });
      this.tip.hidden = true;
      wrap.appendChild(this.svg);
      wrap.appendChild(this.tip);
      root.appendChild(wrap);
      this.wrap = wrap;
      root.appendChild(this.markerLegend());
      this.note = el('p', { class: 'note' });
      root.appendChild(this.note);
      root.appendChild(this.runList());
      let pending = 0;
      window.addEventListener('resize', () => {
        clearTimeout(pending);
        pending = setTimeout(() => this.draw(), 150);
      });
    }

    markerLegend() {
      const box = el('div', { class: 'marker-legend' });
      const item = (draw, text) => {
        const s = sv('svg', { width: 22, height: 16, viewBox: '-11 -8 22 16', 'aria-hidden': 'true' });
        draw(s);
        const span = el('span', { class: 'item' });
        span.appendChild(s);
        span.appendChild(document.createTextNode(text));
        box.appendChild(span);
      };
      item((s) => s.appendChild(sv('circle', { r: 5, fill: '#444' })), 'measured');
      item((s) => s.appendChild(sv('path', { d: 'M0,-6L6,0L0,6L-6,0Z', fill: '#fff', stroke: '#444', 'stroke-width': 2 })), 'predicted (reference engine)');
      item((s) => s.appendChild(sv('circle', { r: 5, fill: '#444', opacity: 0.3 })), 'faded: not on the run’s frontier in this view');
      item((s) => s.appendChild(sv('path', { d: 'M-5,-5L5,5M-5,5L5,-5', stroke: '#444', 'stroke-width': 2 })), 'invalid point');
      item((s) => s.appendChild(sv('line', { x1: -10, x2: 10, y1: 0, y2: 0, stroke: '#444', 'stroke-width': 2 })), 'frontier (dashed: predicted)');
      item((s) => {
        s.appendChild(sv('line', { x1: -8, x2: 8, y1: 0, y2: 0, stroke: '#444' }));
        s.appendChild(sv('line', { x1: 0, x2: 0, y1: -7, y2: 7, stroke: '#444' }));
      }, '95% intervals');
      const rule = el(
        'p',
        { class: 'rule' },
        'Frontier: a run’s points on its North Star frontier (tok/s/GPU against P90 E2E-normalised interactivity) ' +
          'that no valid point of the same run beats in the coordinates shown. tok/s/GPU counts input (cached included) and output tokens.'
      );
      const wrap = el('div', { class: 'legend' });
      wrap.appendChild(box);
      wrap.appendChild(rule);
      return wrap;
    }

    runList() {
      const box = el('div', { class: 'run-list' });
      const head = el('div', { class: 'run-list-head' });
      head.appendChild(el('strong', {}, this.data.runs.length + ' run(s)'));
      const setAll = (label, pick) => {
        const b = el('button', { type: 'button' }, label);
        b.addEventListener('click', () => {
          this.shown = new Set(pick());
          this.syncChecks();
          this.draw();
        });
        head.appendChild(b);
      };
      setAll('newest ' + DEFAULT_SHOWN, () => this.data.runs.slice(0, DEFAULT_SHOWN).map((r, i) => i));
      setAll('all', () => this.data.runs.map((r, i) => i));
      setAll('none', () => []);
      box.appendChild(head);
      const list = el('ul');
      this.checks = this.data.runs.map((r, i) => {
        const li = el('li');
        const l = el('label');
        const c = el('input', { type: 'checkbox', 'data-run': r.id });
        c.checked = this.shown.has(i);
        c.addEventListener('change', () => {
          if (c.checked) this.shown.add(i);
          else this.shown.delete(i);
          this.draw();
        });
        l.appendChild(c);
        const sw = el('span', { class: 'swatch' });
        sw.style.background = this.colour(i);
        l.appendChild(sw);
        const name = el('a', { class: 'run-id' }, r.id);
        if (r.url.startsWith('/')) name.setAttribute('href', r.url);
        l.appendChild(name);
        let meta = ' · ' + when(r.finished_unix) + ' · ' + (r.result_kind || 'no points');
        if (r.gate) meta += ' · gate ' + r.gate;
        if (r.id === this.baseline) meta += ' · baseline';
        l.appendChild(el('span', { class: 'muted' }, meta));
        li.appendChild(l);
        if (r.report_url && r.report_url.startsWith('/')) {
          li.appendChild(document.createTextNode(' '));
          li.appendChild(el('a', { href: r.report_url }, 'report'));
        }
        li.appendChild(document.createTextNode(' '));
        li.appendChild(el('a', { href: r.compare_url }, 'vs baseline'));
        list.appendChild(li);
        return c;
      });
      box.appendChild(list);
      return box;
    }

    syncChecks() {
      this.checks.forEach((c, i) => (c.checked = this.shown.has(i)));
    }

    visiblePoints() {
      return this.data.points.filter((p) => {
        if (!this.shown.has(p.run) || !this.kinds[p.kind === 'measured' ? 'measured' : 'predicted']) return false;
        const x = p.x[this.view];
        return x && Number.isFinite(x.value) && Number.isFinite(p.y.value);
      });
    }

    draw() {
      const view = this.data.views.find((v) => v.key === this.view);
      this.viewButtons.forEach((b) => b.classList.toggle('active', b.dataset.view === this.view));
      const svg = this.svg;
      svg.replaceChildren();
      this.tip.hidden = true;
      const W = Math.max(480, Math.min(this.wrap.clientWidth || 960, 1400));
      const H = Math.round(Math.min(560, Math.max(360, W * 0.5)));
      svg.setAttribute('width', W);
      svg.setAttribute('height', H);
      svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
      const m = { l: 78, r: 24, t: 16, b: 52 };
      const pts = this.visiblePoints();
      svg.dataset.points = '0';
      if (!pts.length) {
        svg.appendChild(sv('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, 'No point of the selected runs has this metric.'));
        this.note.textContent = '';
        this.root.dataset.state = 'ready';
        return;
      }
      const xs = [], ys = [];
      for (const p of pts) {
        const x = p.x[this.view];
        xs.push(x.value);
        if (Number.isFinite(x.lo)) xs.push(x.lo);
        if (Number.isFinite(x.hi)) xs.push(x.hi);
        ys.push(p.y.value);
        if (Number.isFinite(p.y.lo)) ys.push(p.y.lo);
        if (Number.isFinite(p.y.hi)) ys.push(p.y.hi);
      }
      // A log axis asked for is bounded by the lowest positive value (the others are left out
      // below); 'auto' chooses log only when every value is positive.
      const low = (v, mode) => {
        const p = mode === 'log' ? v.filter((a) => a > 0) : v;
        return Math.min(...(p.length ? p : v));
      };
      const xlo = low(xs, this.xmode), xhi = Math.max(...xs);
      const ylo = low(ys, this.ymode), yhi = Math.max(...ys);
      const X = scale(xlo, xhi, this.xmode, m.l, W - m.r);
      const Y = scale(ylo, yhi, this.ymode, H - m.b, m.t);
      this.axes(svg, X, Y, W, H, m, view);

      const plotted = pts.filter((p) => (!X.log || p.x[this.view].value > 0) && (!Y.log || p.y.value > 0));
      // One curve per run and scenario: a fixed-seq-len run has one per ISL/OSL.
      const byRun = new Map();
      for (const p of plotted) {
        const curve = p.run + '|' + (p.seq || '');
        if (!byRun.has(curve)) byRun.set(curve, []);
        byRun.get(curve).push(p);
      }
      const clampX = (v) => (X.log && !(v > 0) ? null : X(v));
      const clampY = (v) => (Y.log && !(v > 0) ? null : Y(v));
      const layer = { lines: sv('g', { class: 'frontiers' }), whiskers: sv('g', { class: 'whiskers' }), marks: sv('g', { class: 'marks' }), labels: sv('g', { class: 'labels' }) };
      let count = 0;
      const placed = [];
      const labelled = byRun.size <= 3;
      for (const list of byRun.values()) {
        const colour = this.colour(list[0].run);
        const front = list.filter((p) => p.frontier[this.view]).sort((a, b) => a.x[this.view].value - b.x[this.view].value);
        if (front.length > 1) {
          const measured = front.every((p) => p.kind === 'measured');
          layer.lines.appendChild(
            sv('polyline', {
              points: front.map((p) => X(p.x[this.view].value).toFixed(1) + ',' + Y(p.y.value).toFixed(1)).join(' '),
              fill: 'none',
              stroke: colour,
              'stroke-width': 2,
              'stroke-dasharray': measured ? '' : '6 4',
            })
          );
        }
        for (const p of list) {
          const x = p.x[this.view];
          const cx = X(x.value), cy = Y(p.y.value);
          const onFront = !!p.frontier[this.view];
          const g = sv('g', { class: 'whisker' });
          if (Number.isFinite(x.lo) && Number.isFinite(x.hi)) {
            const a = clampX(x.lo), b = clampX(x.hi);
            if (a !== null && b !== null) {
              g.appendChild(sv('line', { x1: a, x2: b, y1: cy, y2: cy, stroke: colour }));
              g.appendChild(sv('line', { x1: a, x2: a, y1: cy - 3, y2: cy + 3, stroke: colour }));
              g.appendChild(sv('line', { x1: b, x2: b, y1: cy - 3, y2: cy + 3, stroke: colour }));
            }
          }
          if (Number.isFinite(p.y.lo) && Number.isFinite(p.y.hi)) {
            const a = clampY(p.y.lo), b = clampY(p.y.hi);
            if (a !== null && b !== null) {
              g.appendChild(sv('line', { x1: cx, x2: cx, y1: a, y2: b, stroke: colour }));
              g.appendChild(sv('line', { x1: cx - 3, x2: cx + 3, y1: a, y2: a, stroke: colour }));
              g.appendChild(sv('line', { x1: cx - 3, x2: cx + 3, y1: b, y2: b, stroke: colour }));
            }
          }
          if (!onFront) g.setAttribute('opacity', 0.35);
          layer.whiskers.appendChild(g);

          const mark = sv('g', { class: 'pt', transform: 'translate(' + cx.toFixed(1) + ',' + cy.toFixed(1) + ')', tabindex: 0, 'data-point': p.id, 'data-kind': p.kind });
          if (!p.valid) {
            mark.appendChild(sv('path', { d: 'M-5,-5L5,5M-5,5L5,-5', stroke: colour, 'stroke-width': 2.5 }));
          } else if (p.kind === 'measured') {
            mark.appendChild(sv('circle', { r: 5, fill: colour, stroke: '#fff', 'stroke-width': 1 }));
          } else {
            mark.appendChild(sv('path', { d: 'M0,-6L6,0L0,6L-6,0Z', fill: '#fff', stroke: colour, 'stroke-width': 2 }));
          }
          if (!onFront) mark.setAttribute('opacity', 0.45);
          // A larger invisible target, so that small markers are easy to hover.
          mark.appendChild(sv('circle', { r: 10, fill: 'transparent', class: 'hit' }));
          const show = (ev) => this.showTip(p, cx, cy, ev);
          mark.addEventListener('mouseenter', show);
          mark.addEventListener('focus', show);
          mark.addEventListener('mouseleave', () => (this.tip.hidden = true));
          mark.addEventListener('blur', () => (this.tip.hidden = true));
          layer.marks.appendChild(mark);
          count++;
          if (labelled && onFront) this.label(layer.labels, placed, shortId(p.id), cx, cy, W, H, m);
        }
      }
      for (const g of [layer.lines, layer.whiskers, layer.marks, layer.labels]) svg.appendChild(g);
      svg.dataset.points = String(count);
      svg.setAttribute('aria-label', count + ' points, tok/s/GPU against ' + view.label);
      const hidden = pts.length - plotted.length;
      this.note.textContent =
        count + ' point(s) of ' + new Set(plotted.map((p) => p.run)).size + ' run(s)' + (hidden ? '; ' + hidden + ' not positive, left out of the log scale' : '') +
        (this.view === 'ttft_p90' ? '; TTFT has no interval' : '') + (labelled ? '' : '; labels hidden with more than 3 runs (hover a point)');
      this.root.dataset.state = 'ready';
    }

    axes(svg, X, Y, W, H, m, view) {
      const g = sv('g', { class: 'axes' });
      for (const t of X.ticks()) {
        const x = X(t);
        if (x < m.l - 0.5 || x > W - m.r + 0.5) continue;
        g.appendChild(sv('line', { x1: x, x2: x, y1: m.t, y2: H - m.b, class: 'grid' }));
        g.appendChild(sv('text', { x: x, y: H - m.b + 16, 'text-anchor': 'middle' }, fmtTick(t)));
      }
      for (const t of Y.ticks()) {
        const y = Y(t);
        if (y < m.t - 0.5 || y > H - m.b + 0.5) continue;
        g.appendChild(sv('line', { x1: m.l, x2: W - m.r, y1: y, y2: y, class: 'grid' }));
        g.appendChild(sv('text', { x: m.l - 6, y: y + 4, 'text-anchor': 'end' }, fmtTick(t)));
      }
      g.appendChild(sv('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: 'frame' }));
      const better = view.higher_is_better ? '→ better' : '← better';
      g.appendChild(sv('text', { x: (m.l + W - m.r) / 2, y: H - 12, 'text-anchor': 'middle', class: 'label' }, view.label + (X.log ? ' (log)' : '') + '   ' + better));
      g.appendChild(
        sv('text', { x: 16, y: (m.t + H - m.b) / 2, 'text-anchor': 'middle', class: 'label', transform: 'rotate(-90 16 ' + (m.t + H - m.b) / 2 + ')' }, 'tok/s/GPU' + (Y.log ? ' (log)' : '') + '   → better')
      );
      svg.appendChild(g);
    }

    // A label beside a point unless it would overlap one already placed.
    label(g, placed, text, cx, cy, W, H, m) {
      const w = text.length * 6.4 + 4, h = 12;
      for (const [dx, dy] of [[7, -7], [7, 13], [-7 - w, -7], [-7 - w, 13]]) {
        const x = cx + dx, y = cy + dy;
        const box = { x: x, y: y - h + 2, w: w, h: h };
        if (box.x < m.l || box.x + w > W - m.r || box.y < m.t || box.y + h > H - m.b) continue;
        if (placed.some((b) => box.x < b.x + b.w && b.x < box.x + box.w && box.y < b.y + b.h && b.y < box.y + box.h)) continue;
        placed.push(box);
        g.appendChild(sv('text', { x: x + 2, y: y, class: 'pt-label' }, text));
        return;
      }
    }

    showTip(p, cx, cy) {
      const d = this.data;
      const run = d.runs[p.run];
      const tip = this.tip;
      tip.replaceChildren();
      tip.appendChild(el('div', { class: 'tip-title' }, p.id));
      const line = (text, cls) => tip.appendChild(el('div', cls ? { class: cls } : {}, text));
      line('run ' + run.id + ' · ' + when(run.finished_unix) + (run.gate ? ' · gate ' + run.gate : ''), 'muted');
      const text = (i) => (i === null || i === undefined ? '' : d.texts[i]);
      line(p.kind + (text(p.provenance) ? ' with ' + text(p.provenance) : '') + (text(p.trace_set) ? '; traces ' + text(p.trace_set) : ''));
      const bits = [p.arm, 'conc ' + p.conc, p.gpus + ' GPU(s)'];
      if (p.seq) bits.push('fixed ' + p.seq);
      if (p.topology) bits.push(p.topology);
      if (p.hardware) bits.push(p.hardware);
      if (p.framework) bits.push(p.framework);
      line(bits.join(' · '));
      const reasons = p.invalid_reasons || [];
      if (!p.valid || p.status !== 'done') line(p.status + (reasons.length ? ': ' + reasons.join('; ') : '') + ' (invalid)', 'bad');
      const t = el('table', { class: 'tip-metrics' });
      const row = (k, v) => {
        const tr = el('tr');
        tr.appendChild(el('th', {}, k));
        tr.appendChild(el('td', {}, v));
        t.appendChild(tr);
      };
      row('tok/s/GPU', withCi(p.y));
      row('output tok/s/GPU', fmt(p.y_output));
      for (const v of d.views) {
        if (v.key === 'ttft_p90') continue;
        row(v.label, withCi(p.x[v.key]));
      }
      row('TTFT p50 / p90 / p99 (s)', fmt(p.ttft_p50) + ' / ' + fmt(p.x.ttft_p90 && p.x.ttft_p90.value) + ' / ' + fmt(p.ttft_p99));
      tip.appendChild(t);
      let front = 'frontier in this view: ' + (p.frontier[this.view] === undefined ? 'not analysed' : p.frontier[this.view] ? 'yes' : 'no');
      const by = p.dominated_by[this.view] || p.dominated_by[NORTH_STAR];
      if (!p.frontier[this.view] && by) front += ', dominated by ' + shortId(by);
      if (Number.isFinite(p.p_frontier)) front += ' · p(North Star frontier) = ' + p.p_frontier.toFixed(2);
      line(front);
      if (p.flags !== null && p.flags !== undefined) {
        const f = d.flags[p.flags];
        line('launch against the ' + f.base + ':', 'tip-sub');
        const changes = f.worker.concat(f.env.map((c) => Object.assign({ env: true }, c)));
        if (!changes.length) line('same as the base', 'muted');
        const ul = el('ul', { class: 'flags' });
        for (const c of changes) {
          const side = (v) => (v === null || v === undefined ? 'unset' : v === '' ? 'set' : v);
          const text = c.name + (c.env ? ' (env)' : '') + ': ' + (c.base === null || c.base === undefined ? '+ ' + side(c.point) : c.point === null || c.point === undefined ? '− ' + side(c.base) : side(c.base) + ' → ' + side(c.point));
          ul.appendChild(el('li', {}, text));
        }
        if (changes.length) tip.appendChild(ul);
        if (f.router) line('router: ' + f.router, 'muted');
      } else {
        line('launch not recorded', 'muted');
      }
      tip.hidden = false;
      const ww = this.wrap.clientWidth;
      const tw = tip.offsetWidth, th = tip.offsetHeight;
      let left = cx + 14;
      if (left + tw > ww) left = Math.max(0, cx - 14 - tw);
      let top = cy - th / 2;
      top = Math.max(0, Math.min(top, this.svg.clientHeight - th));
      tip.style.left = left + 'px';
      tip.style.top = top + 'px';
    }

    render() {
      this.build();
      this.draw();
    }
  }

  async function start(root) {
    const key = root.dataset.config || '';
    const query = root.dataset.query || '';
    try {
      const resp = await fetch('/api/config/' + encodeURIComponent(key) + (query ? '?' + query : ''), { headers: { Accept: 'application/json' } });
      const body = await resp.json();
      if (!resp.ok) throw new Error(body.error || resp.statusText);
      new ChartApp(root, body).render();
    } catch (e) {
      root.replaceChildren(el('p', { class: 'error' }, 'Could not load the points of ' + key + ': ' + e.message));
      root.dataset.state = 'error';
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    for (const root of document.querySelectorAll('.chart-app')) start(root);
  });
})();
