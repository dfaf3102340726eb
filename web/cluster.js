// The cluster view: every node and GPU as a cell of one <canvas>, grouped by topology (the
// domains above the node, outermost first; NVLink groups apart inside a node). Cells are
// coloured by queue or priority class; a fractional share fills its part of the cell; free GPUs
// are pale green. Cordoned and draining nodes have an orange frame (draining: hatched), unhealthy
// and lost ones a red frame with grey cells. Events repaint only the cells they change.

export const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#9c6ade', '#edc948',
  '#b07aa1', '#ff9da7', '#9c755f', '#3b5bdb', '#d9480f', '#0b7285', '#862e9c', '#5c940d',
  '#c92a2a', '#495057'];
const FREE = '#cdeed8';
const FREE_CLOSED = '#ece6d6';  // free, on a cordoned or draining node
const DOWN = '#c4c4c4';         // a device of an unhealthy or lost node
const FRAME = '#aab4bf';
const FRAME_CLOSED = '#e08a00';
const FRAME_DOWN = '#d0342c';
const ADMIN = ['schedulable', 'cordoned', 'draining'];
const HEALTH = ['healthy', 'unhealthy', 'lost'];

export class ClusterView {
  constructor(canvas, scroll, spacer) {
    this.canvas = canvas;
    this.scroll = scroll;
    this.spacer = spacer;
    this.ctx = canvas.getContext('2d', { alpha: false });
    this.colourBy = 'queue';
    this.perf = { renders: [], repaints: [] };
    this.map = null;
    this.jobs = new Map();  // id -> {id, queue, cls, user, start, ckpt, stopping, runs}
  }

  // A whole map (GET /v1/cluster/map): rebuilt and drawn.
  load(map) {
    const t0 = performance.now();
    this.map = map;
    const n = map.nodes.length;
    this.nodeIndex = new Map();
    this.devFirst = new Int32Array(n + 1);
    for (let i = 0; i < n; ++i) {
      this.nodeIndex.set(map.nodes[i][0], i);
      this.devFirst[i + 1] = this.devFirst[i] + map.shapes[map.nodes[i][2]].length / 2;
    }
    const devices = this.devFirst[n];
    this.devCount = devices;
    this.used = new Int32Array(devices);
    this.shares = new Array(devices).fill(null);  // [[job, milli], ...] or null
    this.jobs = new Map();
    for (const [id, queue, cls, user, start, ckpt, stopping, runs] of map.jobs) {
      this.place({ id, queue, cls, user, start, ckpt, stopping, runs }, false);
    }
    const t1 = performance.now();
    this.layout();
    const t2 = performance.now();
    this.draw();
    const t3 = performance.now();
    this.perf.lastLoad = { modelMs: t1 - t0, layoutMs: t2 - t1, paintMs: t3 - t2 };
    const ms = t3 - t0;
    this.perf.renders.push(ms);
    this.perf.lastRenderMs = ms;
    return ms;
  }

  // ---- Layout: groups of nodes by their innermost domain, nodes flowing in rows ----
  layout() {
    const map = this.map;
    const devices = this.devCount;
    const s = devices <= 256 ? 22 : devices <= 1024 ? 16 : devices <= 4096 ? 11 : devices <= 20000 ? 7 : 5;
    this.cell = s;
    this.pitch = s + 1;
    // Each shape's size and the offset of each of its devices, computed once.
    this.geo = map.shapes.map((shape) => this.shapeGeometry(shape));
    // The view's width (while hidden, the window's less the side panel).
    const width = Math.max(600, (this.scroll.clientWidth || window.innerWidth - 440) - 4);
    const heading = s >= 11 ? 18 : 13;
    const margin = s >= 11 ? 6 : 3;
    const n = map.nodes.length;
    const boxes = new Float32Array(n * 4);
    this.headings = [];
    // Rows of nodes, for hit tests: each row's top, height and first node.
    const rowY = [];
    const rowH = [];
    const rowFirst = [];
    let x = 0;
    let y = 0;
    let rowHeight = 0;
    let group = null;
    const pathOf = (d) => {
      const names = [];
      while (d >= 0) {
        names.unshift(map.domains[d][0]);
        d = map.domains[d][2];
      }
      return names.join(' / ');
    };
    const endRow = () => { if (rowY.length) rowH[rowH.length - 1] = rowHeight; };
    for (let i = 0; i < n; ++i) {
      const node = map.nodes[i];
      const dom = node[1];
      const g = this.geo[node[2]];
      if (i === 0 || dom !== group) {
        group = dom;
        endRow();
        if (i > 0) y += rowHeight + margin * 2;
        this.headings.push([dom < 0 ? 'nodes' : pathOf(dom), y + heading - 4]);
        y += heading;
        x = 0;
        rowHeight = 0;
        rowY.push(y);
        rowH.push(0);
        rowFirst.push(i);
      } else if (x + g.w > width) {
        endRow();
        x = 0;
        y += rowHeight + margin;
        rowHeight = 0;
        rowY.push(y);
        rowH.push(0);
        rowFirst.push(i);
      }
      boxes[i * 4] = x;
      boxes[i * 4 + 1] = y;
      boxes[i * 4 + 2] = g.w;
      boxes[i * 4 + 3] = g.h;
      x += g.w + margin;
      if (g.h > rowHeight) rowHeight = g.h;
    }
    endRow();
    rowFirst.push(n);
    this.boxes = boxes;
    this.rows = { y: rowY, h: rowH, first: rowFirst };
    this.width = width;
    this.height = y + rowHeight + margin + 2;
    this.heading = heading;
    this.resizeCanvas();
  }

  // The canvas covers the visible part of the view only (it stays at the top of the scrolled
  // area; a spacer below it gives the scroll its length): a draw costs what is on screen,
  // whatever the cluster's size.
  resizeCanvas() {
    const visible = this.scroll.clientHeight || window.innerHeight - 140;
    this.viewH = Math.max(100, Math.min(this.height, visible - 4));
    this.viewY = Math.min(this.scroll.scrollTop, Math.max(0, this.height - this.viewH));
    this.dpr = Math.min(2, window.devicePixelRatio || 1);
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.viewH * this.dpr);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${this.viewH}px`;
    this.spacer.style.height = `${Math.max(0, this.height - this.viewH)}px`;
    this.spacer.style.width = `${this.width}px`;
  }

  // The view scrolled: what is now visible is drawn.
  scrolled() {
    if (!this.map) return;
    const y = Math.min(this.scroll.scrollTop, Math.max(0, this.height - this.viewH));
    if (y === this.viewY) return;
    this.viewY = y;
    this.draw();
  }

  // Whether a box [y, y + h) shows.
  visible(y, h) {
    return y + h > this.viewY && y < this.viewY + this.viewH;
  }

  // A node of this shape: its size, and each device's offset in it (rows of at most 16 devices,
  // NVLink groups 2 px apart).
  shapeGeometry(shape) {
    const count = shape.length / 2;
    const perRow = Math.min(16, Math.max(1, count));
    const dx = new Int16Array(count);
    const dy = new Int16Array(count);
    let widest = this.pitch;
    for (let d = 0; d < count; ++d) {
      const first = d % perRow === 0;
      let x = first ? 0 : dx[d - 1] + this.pitch;
      if (!first && shape[d * 2 + 1] !== shape[d * 2 - 1]) x += 2;
      dx[d] = x;
      dy[d] = Math.floor(d / perRow) * this.pitch;
      widest = Math.max(widest, x + this.pitch);
    }
    const rows = Math.max(1, Math.ceil(count / perRow));
    return { w: widest + 3, h: rows * this.pitch + 3, dx, dy };
  }

  // Where device d of node i is drawn: [x, y].
  devicePos(i, d) {
    const g = this.geo[this.map.nodes[i][2]];
    return [this.boxes[i * 4] + 2 + g.dx[d], this.boxes[i * 4 + 1] + 2 + g.dy[d]];
  }

  // ---- Drawing ----
  // Everything, in few calls: each kind of frame and cell gathered into one path per colour.
  draw() {
    const ctx = this.ctx;
    const map = this.map;
    const s = this.cell;
    const top = this.viewY;
    const bottomY = top + this.viewH;
    // Content coordinates from here on: the canvas shows [viewY, viewY + viewH).
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, -top * this.dpr);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, top, this.width, this.viewH);
    ctx.fillStyle = '#3d4852';
    ctx.font = `${this.heading - 6}px system-ui, sans-serif`;
    for (const [text, y] of this.headings) {
      if (y + this.heading > top && y - this.heading < bottomY) ctx.fillText(text, 0, y);
    }
    const frames = [new Path2D(), new Path2D(), new Path2D()];  // normal, closed, down
    const backs = [new Path2D(), new Path2D(), new Path2D()];   // FREE, FREE_CLOSED, DOWN
    const used = new Map();  // colour -> Path2D
    const ticks = new Path2D();
    const crosses = new Path2D();
    // The rows on screen: from the last that starts above the top to the first below the bottom.
    const rows = this.rows;
    let r0 = 0;
    let hi = rows.y.length - 1;
    while (r0 < hi) {
      const mid = (r0 + hi + 1) >> 1;
      if (rows.y[mid] <= top) r0 = mid;
      else hi = mid - 1;
    }
    let r1 = r0;
    while (r1 < rows.y.length && rows.y[r1] < bottomY) ++r1;
    const from = rows.first[r0] ?? 0;
    const to = rows.first[r1] ?? map.nodes.length;
    const boxes = this.boxes;
    for (let i = from; i < to; ++i) {
      const node = map.nodes[i];
      const admin = node[3];
      const health = node[4];
      const kind = health ? 2 : admin ? 1 : 0;
      const bx = boxes[i * 4];
      const by = boxes[i * 4 + 1];
      frames[kind].rect(bx + 0.5, by + 0.5, boxes[i * 4 + 2] - 1, boxes[i * 4 + 3] - 1);
      if (admin === 2 || health === 2) {
        crosses.moveTo(bx + 1, by + boxes[i * 4 + 3] - 1);
        crosses.lineTo(bx + boxes[i * 4 + 2] - 1, by + 1);
      }
      const g = this.geo[node[2]];
      const first = this.devFirst[i];
      const count = this.devFirst[i + 1] - first;
      for (let d = 0; d < count; ++d) {
        const x = bx + 2 + g.dx[d];
        const y = by + 2 + g.dy[d];
        backs[kind].rect(x, y, s, s);
        const shares = this.shares[first + d];
        if (!shares) continue;
        let bottom = y + s;
        for (const [job, milli] of shares) {
          const info = this.jobs.get(job);
          const h = milli >= 1000 ? s : Math.max(1, Math.round((s * milli) / 1000));
          const colour = this.colourOf(info);
          let path = used.get(colour);
          if (!path) used.set(colour, (path = new Path2D()));
          path.rect(x, bottom - h, s, h);
          bottom -= h;
          if (info && info.stopping >= 0) {
            crosses.moveTo(x, y + s);
            crosses.lineTo(x + s, y);
          }
        }
        if (this.used[first + d] < 1000 && s >= 7) ticks.rect(x, Math.max(y, bottom), s, 1);
      }
    }
    [FREE, FREE_CLOSED, DOWN].forEach((colour, k) => {
      ctx.fillStyle = colour;
      ctx.fill(backs[k]);
    });
    for (const [colour, path] of used) {
      ctx.fillStyle = colour;
      ctx.fill(path);
    }
    ctx.fillStyle = '#222';
    ctx.fill(ticks);
    [FRAME, FRAME_CLOSED, FRAME_DOWN].forEach((colour, k) => {
      ctx.strokeStyle = colour;
      ctx.lineWidth = k ? 1.5 : 1;
      ctx.stroke(frames[k]);
    });
    ctx.strokeStyle = '#111';
    ctx.lineWidth = 1;
    ctx.stroke(crosses);
  }

  paintNode(i) {
    const ctx = this.ctx;
    const [x, y, w, h] = this.boxes.subarray(i * 4, i * 4 + 4);
    if (!this.visible(y, h)) return;
    const admin = this.map.nodes[i][3];
    const health = this.map.nodes[i][4];
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(x, y, w, h);
    ctx.strokeStyle = health ? FRAME_DOWN : admin ? FRAME_CLOSED : FRAME;
    ctx.lineWidth = health || admin ? 1.5 : 1;
    ctx.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1);
    const first = this.devFirst[i];
    for (let g = first; g < this.devFirst[i + 1]; ++g) this.paintCell(i, g - first, g);
    if (admin === 2 || health === 2) {
      // Draining or lost: a diagonal across the node.
      ctx.beginPath();
      ctx.moveTo(x + 1, y + h - 1);
      ctx.lineTo(x + w - 1, y + 1);
      ctx.strokeStyle = health === 2 ? FRAME_DOWN : FRAME_CLOSED;
      ctx.lineWidth = 1;
      ctx.stroke();
    }
  }

  paintCell(i, d, g) {
    const ctx = this.ctx;
    const s = this.cell;
    const [x, y] = this.devicePos(i, d);
    if (!this.visible(y, s)) return;
    const admin = this.map.nodes[i][3];
    const health = this.map.nodes[i][4];
    ctx.fillStyle = health ? DOWN : admin ? FREE_CLOSED : FREE;
    ctx.fillRect(x, y, s, s);
    const shares = this.shares[g];
    if (!shares) return;
    // Shares fill the cell from the bottom, each in its job's colour: a half-used GPU is half
    // filled, its free part still green.
    let bottom = y + s;
    let stopping = false;
    for (const [job, milli] of shares) {
      const info = this.jobs.get(job);
      const h = milli >= 1000 ? s : Math.max(1, Math.round((s * milli) / 1000));
      ctx.fillStyle = this.colourOf(info);
      ctx.fillRect(x, bottom - h, s, h);
      bottom -= h;
      stopping = stopping || (info && info.stopping >= 0);
    }
    if (this.used[g] < 1000 && s >= 7) {
      // A fractional share: a dark tick on the used part's top edge.
      ctx.fillStyle = '#222';
      ctx.fillRect(x, Math.max(y, bottom), s, 1);
    }
    if (stopping) {
      // Told to stop (evicted, within its grace period): crossed.
      ctx.strokeStyle = '#111';
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, y + s);
      ctx.lineTo(x + s, y);
      ctx.stroke();
    }
  }

  colourOf(job) {
    if (!job) return '#888';
    const k = this.colourBy === 'class' ? job.cls : job.queue;
    return k < 0 ? '#888' : PALETTE[k % PALETTE.length];
  }

  // [[name, colour], ...] of what the colours mean.
  legend() {
    if (!this.map) return [];
    const names = this.colourBy === 'class' ? this.map.priority_classes : this.map.queues;
    return names.map((name, k) => [name, PALETTE[k % PALETTE.length]]);
  }

  // Lays out and draws again when the view's width changed (a resize, the tab shown).
  relayout() {
    if (!this.map || !this.scroll.clientWidth) return;
    if (Math.max(600, this.scroll.clientWidth - 4) !== this.width) {
      this.layout();
    } else {
      this.resizeCanvas();
    }
    this.draw();
  }

  setColourBy(mode) {
    this.colourBy = mode;
    if (this.map) this.draw();
  }

  // ---- Changes ----
  // Puts a running job on its devices; repaints them when `paint`.
  place(job, paint = true) {
    const old = this.jobs.get(job.id);
    if (old) this.remove(job.id, paint);
    this.jobs.set(job.id, job);
    const touched = [];
    for (const [node, first, count, milli] of job.runs) {
      for (let d = first; d < first + count; ++d) {
        const g = this.devFirst[node] + d;
        if (g >= this.devFirst[node + 1]) continue;
        (this.shares[g] || (this.shares[g] = [])).push([job.id, milli]);
        this.used[g] += milli;
        touched.push([node, d, g]);
      }
    }
    if (paint) for (const [node, d, g] of touched) this.paintCell(node, d, g);
  }

  remove(id, paint = true) {
    const job = this.jobs.get(id);
    if (!job) return;
    this.jobs.delete(id);
    for (const [node, first, count, milli] of job.runs) {
      for (let d = first; d < first + count; ++d) {
        const g = this.devFirst[node] + d;
        const shares = this.shares[g];
        if (!shares) continue;
        const k = shares.findIndex(([j]) => j === id);
        if (k >= 0) shares.splice(k, 1);
        this.used[g] -= milli;
        if (!shares.length) this.shares[g] = null;
        if (paint) this.paintCell(node, d, g);
      }
    }
  }

  repaintJob(id) {
    const job = this.jobs.get(id);
    if (!job) return;
    for (const [node, first, count] of job.runs) {
      for (let d = first; d < first + count; ++d) this.paintCell(node, d, this.devFirst[node] + d);
    }
  }

  // A started event's allocation ({tasks: [{node, devices: [{device, gpu_milli}]}]}) as runs.
  runsOf(allocation) {
    const runs = [];
    for (const task of allocation.tasks || []) {
      const node = this.nodeIndex.get(task.node);
      if (node === undefined) continue;
      for (const dev of task.devices || []) {
        runs.push([node, dev.device, 1, dev.gpu_milli === undefined ? 1000 : dev.gpu_milli]);
      }
    }
    return runs;
  }

  setNodeAdmin(name, admin) {
    const i = this.nodeIndex.get(name);
    if (i === undefined) return;
    this.map.nodes[i][3] = admin;
    this.paintNode(i);
  }

  // A node's health from its events: 0 healthy (node_ready), 2 lost (node_lost).
  setNodeHealth(name, health) {
    const i = this.nodeIndex.get(name);
    if (i === undefined) return;
    this.map.nodes[i][4] = health;
    this.paintNode(i);
  }

  // ---- Reading ----
  // What is under (x, y) in the canvas's CSS pixels: {node, device, global} or null.
  hit(x, y) {
    if (!this.map) return null;
    const { y: ys, h: hs, first } = this.rows;
    // The row: the last that starts at or above y.
    let lo = 0;
    let hi = ys.length - 1;
    if (hi < 0 || y < ys[0]) return null;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ys[mid] <= y) lo = mid;
      else hi = mid - 1;
    }
    if (y >= ys[lo] + hs[lo]) return null;
    // The node: the last of the row that starts at or left of x.
    let a = first[lo];
    let b = first[lo + 1] - 1;
    while (a < b) {
      const mid = (a + b + 1) >> 1;
      if (this.boxes[mid * 4] <= x) a = mid;
      else b = mid - 1;
    }
    const i = a;
    const [bx, by, bw, bh] = this.boxes.subarray(i * 4, i * 4 + 4);
    if (x < bx || y < by || x >= bx + bw || y >= by + bh) return null;
    const count = this.devFirst[i + 1] - this.devFirst[i];
    for (let d = 0; d < count; ++d) {
      const [cx, cy] = this.devicePos(i, d);
      if (x >= cx - 1 && x < cx + this.pitch + 1 && y >= cy - 1 && y < cy + this.pitch) {
        return { node: i, device: d, global: this.devFirst[i] + d };
      }
    }
    return { node: i, device: -1, global: -1 };
  }

  // A description of a node and one of its devices, for the tooltip and the side panel.
  describe(hit) {
    const map = this.map;
    const [name, dom, shape, admin, health] = map.nodes[hit.node];
    const path = [];
    for (let d = dom; d >= 0; d = map.domains[d][2]) path.unshift(map.domains[d][0]);
    const out = {
      node: name,
      path: path.join(' / '),
      admin: ADMIN[admin] || '?',
      health: HEALTH[health] || '?',
      devices: this.devFirst[hit.node + 1] - this.devFirst[hit.node],
      device: hit.device,
    };
    if (hit.device >= 0) {
      const sh = map.shapes[shape];
      out.type = map.gpu_types[sh[hit.device * 2]];
      out.nvlink = sh[hit.device * 2 + 1];
      out.free_milli = 1000 - this.used[hit.global];
      out.jobs = (this.shares[hit.global] || []).map(([id, milli]) => {
        const j = this.jobs.get(id) || {};
        return {
          id, milli,
          queue: map.queues[j.queue],
          cls: map.priority_classes[j.cls],
          user: j.user,
          start: j.start,
          ckpt: j.ckpt,
          stopping: j.stopping,
        };
      });
    }
    return out;
  }

  summary() {
    if (!this.map) return '';
    let free = 0;
    let busy = 0;
    for (let g = 0; g < this.devCount; ++g) {
      if (this.used[g] === 0) ++free;
      else busy += this.used[g];
    }
    return `${this.map.nodes.length} nodes, ${this.devCount} GPUs: ${(busy / 1000).toFixed(1)} ` +
           `in use, ${free} free`;
  }
}
