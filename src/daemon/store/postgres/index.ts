// The PostgreSQL backend (placeholder until the backend lands).
import type { Store } from '../types.js';

export const PostgresStore = {
  async open(_url: string, _opts: object): Promise<Store> {
    throw new Error('PostgreSQL backend not built yet');
  },
};
