// A line chart of GPU usage over time on a <canvas>, drawn here (no chart library): series of
// milli-GPU values at `times` (Unix ms), or flat lines (a guarantee, a maximum), dashed when asked.

export function drawUsageChart(canvas, times, series) {
  const width = canvas.clientWidth || canvas.width;
  const height = canvas.clientHeight || canvas.height;
  const dpr = Math.min(2, window.devicePixelRatio || 1);
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  const left = 40;
  const right = 8;
  const top = 8;
  const bottom = 22;
  const w = width - left - right;
  const h = height - top - bottom;
  let peak = 1000;
  for (const s of series) {
    if (s.values) for (const v of s.values) peak = Math.max(peak, v);
    if (s.flat !== undefined) peak = Math.max(peak, s.flat);
  }
  // A round top: whole GPUs, in steps of 1, 2, 5 x 10^k.
  const gpusPeak = peak / 1000;
  const step = niceStep(gpusPeak / 4);
  const yMax = Math.ceil(gpusPeak / step) * step;
  const t1 = times.length ? times[times.length - 1] : Date.now();
  const t0 = Math.min(times.length ? times[0] : t1, t1 - 30 * 60e3);
  const x = (t) => left + ((t - t0) / Math.max(1, t1 - t0)) * w;
  const y = (milli) => top + h - (milli / 1000 / yMax) * h;
  ctx.strokeStyle = '#e3e7eb';
  ctx.fillStyle = '#667';
  ctx.font = '10px system-ui, sans-serif';
  ctx.lineWidth = 1;
  for (let v = 0; v <= yMax + 1e-9; v += step) {
    const yy = Math.round(y(v * 1000)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(left, yy);
    ctx.lineTo(left + w, yy);
    ctx.stroke();
    ctx.fillText(String(+v.toFixed(2)), 4, yy + 3);
  }
  // Hour and half-hour marks, as the time ago.
  const span = t1 - t0;
  const tick = span > 3 * 3600e3 ? 3600e3 : span > 3600e3 ? 1800e3 : 600e3;
  for (let t = t1; t >= t0; t -= tick) {
    const xx = Math.round(x(t)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(xx, top);
    ctx.lineTo(xx, top + h);
    ctx.stroke();
    const ago = Math.round((t1 - t) / 60e3);
    const label = ago === 0 ? 'now' : ago % 60 === 0 ? `-${ago / 60}h` : `-${ago}m`;
    ctx.fillText(label, Math.min(xx - 8, width - 26), height - 6);
  }
  for (const s of series) {
    ctx.strokeStyle = s.colour;
    ctx.lineWidth = s.flat !== undefined ? 1.5 : 2;
    ctx.setLineDash(s.dash || []);
    ctx.beginPath();
    if (s.flat !== undefined) {
      ctx.moveTo(left, y(s.flat));
      ctx.lineTo(left + w, y(s.flat));
    } else {
      // Steps: usage holds until the next sample.
      s.values.forEach((v, i) => {
        if (i === 0) ctx.moveTo(x(times[i]), y(v));
        else {
          ctx.lineTo(x(times[i]), y(s.values[i - 1]));
          ctx.lineTo(x(times[i]), y(v));
        }
      });
    }
    ctx.stroke();
  }
  ctx.setLineDash([]);
  if (times.length <= 1) {
    ctx.fillStyle = '#667';
    ctx.fillText('one sample so far: the server samples usage once a minute', left + 6, top + 14);
  }
}

function niceStep(raw) {
  if (raw <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return Math.max(m * p, 0.25);
  return 10 * p;
}
