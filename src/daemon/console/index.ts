// The web console, mounted under /console/ (placeholder until the console lands).
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from '../api/context.js';

export async function consolePlugin(_app: FastifyInstance, _ctx: ApiContext): Promise<void> {}
