// `proxyd admin key create|list|revoke`: its flags and help, and the action that calls keys.ts (imported only when the
// command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { readStdin, dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

export function registerKey(admin: Command): void {
  const key = admin
    .command('key')
    .description('API keys with scopes for every customer endpoint but the whitelist (docs/admin.md, "API keys")');
  key
    .command('create')
    .description('make a key; prints {"id","key",…} (the key is shown only here)')
    .requiredOption('--email <email>')
    .requiredOption('--name <name>', '1-64 printable characters')
    .requiredOption(
      '--scopes <list>',
      'comma-separated: usage:read, users:read, users:write, rules:read, rules:write, audit:read',
    )
    .option('--expires <iso>', 'when the key stops working (ISO 8601; without a zone, UTC)')
    .option(
      '--allowed-ips <list>',
      'comma-separated IPv4/IPv6 addresses and CIDRs the key works from (default: anywhere)',
    )
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all, where) => {
        const { keyCreate } = await import('./keys.js');
        process.stdout.write(
          `${JSON.stringify(await keyCreate({ store, readStdin, where }, all as unknown as Parameters<typeof keyCreate>[1]))}\n`,
        );
      }),
    );
  key
    .command('list')
    .description(
      'the account\'s keys, newest first: JSON lines {"id","name","scopes","created_at","expires_at","allowed_ips","revoked_at","last_used_at","last_used_ip","state"}',
    )
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(
        async (store, all, where) => {
          const { keyList } = await import('./keys.js');
          for (const line of await keyList({ store, readStdin, where }, all as unknown as { email: string }))
            process.stdout.write(`${JSON.stringify(line)}\n`);
        },
        { read: true },
      ),
    );
  key
    .command('revoke')
    .description('revoke a key by its id: refused on every node within 1 s; prints the key (state "revoked")')
    .requiredOption('--email <email>')
    .requiredOption('--id <id>', "the key's id (from key list, or the part after pxk_)")
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all, where) => {
        const { keyRevoke } = await import('./keys.js');
        process.stdout.write(
          `${JSON.stringify(await keyRevoke({ store, readStdin, where }, all as unknown as { email: string; id: string }))}\n`,
        );
      }),
    );
}
