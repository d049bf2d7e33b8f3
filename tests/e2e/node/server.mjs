// Starts and stops `minfer serve --port 0` for the npm client tests. MINFER_BIN is the binary (default: the release
// build), MINFER_TEST_MODEL an optional model to serve (default: the built-in demo model).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.env.MINFER_BIN || path.resolve(here, '../../../build/release/tools/minfer');
let serverLog = '';

// Starts `minfer serve --port 0` and resolves with the URL from its 'listening on http://HOST:PORT' line.
export function startServer(extraArgs) {
  return new Promise((resolve, reject) => {
    const args = ['serve', '--host', '127.0.0.1', '--port', '0', ...extraArgs];
    if (process.env.MINFER_TEST_MODEL) args.push('--model', process.env.MINFER_TEST_MODEL);
    const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => reject(new Error(`no 'listening on' line within 120 s\n${serverLog}`)), 120_000);
    let stdout = '';
    proc.stdout.on('data', (data) => {
      stdout += data;
      serverLog += data;
      const m = stdout.match(/listening on (http:\/\/[^\s]+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1] });
      }
    });
    proc.stderr.on('data', (data) => { serverLog += data; });
    proc.on('error', (err) => { clearTimeout(timer); reject(err); });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`minfer serve exited with ${code} before listening\n${serverLog}`));
    });
  });
}

export function stopServer(proc) {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve();
    const kill = setTimeout(() => proc.kill('SIGKILL'), 30_000);
    proc.on('exit', () => { clearTimeout(kill); resolve(); });
    proc.kill('SIGTERM');
  });
}

