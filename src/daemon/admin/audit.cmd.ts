// `proxyd admin audit [verify|head]`: its flags and help, and the action that calls audit.ts (imported only when the
// command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { fail, dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

export function registerAudit(admin: Command): void {
  const audit = admin
    .command('audit')
    .description('the audit log: one JSON line per record, oldest first (docs/admin.md, "audit")')
    .option('--email <email>', 'records of this account')
    .option('--since <duration|iso>', 'records since, e.g. 24h, 30d or 2026-11-25T10:00:00Z')
    .option('--action <action>', 'records of this action (whitelist.added) or family (whitelist)')
    .option('--limit <n>', 'at most this many')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(
        async (store, all) => {
          const { auditList } = await import('./audit.js');
          await auditList(
            store,
            all as import('./audit.js').AuditOptions,
            (line) => void process.stdout.write(`${line}\n`),
          );
        },
        { read: true },
      ),
    );
  audit
    .command('verify')
    .description("check every hash chain (or one account's): exit 0 when all hold, 1 naming the first broken record")
    .option('--email <email>', "only this account's chain")
    .option(
      '--heads <file>',
      'also check heads kept earlier (lines of `proxyd admin audit head`) are still in their chains',
    )
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(
        async (store, all) => {
          const { auditVerify } = await import('./audit.js');
          const r = await auditVerify(store, all as { email?: string; heads?: string });
          process.stdout.write(`${JSON.stringify(r.json)}\n`);
          if (r.message) fail(r.message);
        },
        { read: true },
      ),
    );
  audit
    .command('head')
    .description(
      "each chain's head (seq and hash) as JSON lines: keep them elsewhere (an external log, a cron job) to prove later that no chain was rewritten",
    )
    .option('--email <email>', "only this account's head")
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(
        async (store, all) => {
          const { auditHeads } = await import('./audit.js');
          for (const h of await auditHeads(store, all as { email?: string }))
            process.stdout.write(`${JSON.stringify(h)}\n`);
        },
        { read: true },
      ),
    );
}
