// `proxyd admin fleet rotate-secret|rotate-cert`: its flags and help, and the action that calls fleet.ts (imported only
// when the command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

/** `proxyd admin fleet …`: one JSON object on stdout. */
const rotateSecretAction = withStore(async (store) => {
  const { rotateSecret } = await import('./fleet.js');
  process.stdout.write(`${JSON.stringify(await rotateSecret(store))}\n`);
});
const rotateCertAction = withStore(async (store, all) => {
  const { rotateCert } = await import('./fleet.js');
  process.stdout.write(`${JSON.stringify(await rotateCert(store, String(all.node)))}\n`);
});

export function registerFleet(admin: Command): void {
  const fleet = admin.command('fleet').description("the entry → exit hop's credentials (docs/admin.md)");
  fleet
    .command('rotate-secret')
    .description('make a new fleet secret; exits accept the old one too for their --hop-grace')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(rotateSecretAction);
  fleet
    .command('rotate-cert')
    .description('give an exit a new hop certificate; returns once it serves it and entries can pin it')
    .requiredOption('--node <name>', "the exit's --node-name")
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(rotateCertAction);
}
