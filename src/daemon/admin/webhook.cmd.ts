// `proxyd admin webhook set|remove` and `proxyd admin webhooks`: its flags and help, and the action that calls
// webhook.ts (imported only when the command runs: main.ts builds the whole tree on every invocation, so this file
// stays light).
import type { Command } from 'commander';
import { readStdin, dataDirOption, databaseUrlOption, withStore, adminAction } from '../process/command-kit.js';

export function registerWebhook(admin: Command): void {
  const webhook = admin
    .command('webhook')
    .description("an account's webhook: usage thresholds and plan expiry, signed (docs/admin.md)");
  webhook
    .command('set')
    .description('set the URL and thresholds; prints {"url","thresholds","secret"} (the secret is shown only here)')
    .requiredOption('--email <email>')
    .requiredOption('--url <url>', 'https:// and a public address (unless --allow-private-webhooks)')
    .option('--thresholds <list>', "percentages of the plan's traffic limit", '80,100')
    .option(
      '--allow-private-webhooks',
      'allow http:// and private or loopback receivers (as the daemons that send run with it)',
    )
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./webhook.js').then((m) => m.webhookSet)));
  webhook
    .command('remove')
    .description('remove the account\'s webhook; prints {"removed":true|false}')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./webhook.js').then((m) => m.webhookRemove)));
  admin
    .command('webhooks')
    .description(
      'the account\'s webhook deliveries, newest first: JSON lines {"id","type","attempts","state","last_status"}',
    )
    .requiredOption('--email <email>')
    .option('--limit <n>', 'at most this many', '100')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(
        async (store, all, where) => {
          const { webhookDeliveries } = await import('./webhook.js');
          for (const line of await webhookDeliveries(
            { store, readStdin, where },
            all as unknown as { email: string; limit: string },
          ))
            process.stdout.write(`${JSON.stringify(line)}\n`);
        },
        { read: true },
      ),
    );
}
