// Chooses how to serve: in this process (one worker) or as a cluster primary (several).
import type { ServeConfig } from './config.js';
import { serveSingle } from './serve.js';

export async function runServe(cfg: ServeConfig): Promise<void> {
  await serveSingle(cfg);
}
