// `proxyctl completion bash|zsh|fish`: its argument and help, and the action that calls completionScript in
// ../completion.ts (imported only when it runs: main.ts builds the whole tree on every invocation, so this file stays
// light).
import type { Command } from 'commander';
import { Exit } from '../exit-codes.js';
import type { Kit } from './kit.js';

export function registerCompletion(program: Command, kit: Kit): void {
  const { run } = kit;
  const { Argument } = kit.commander;
  program
    .command('completion')
    .description('print a shell completion script (generated from the commands themselves)')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(['bash', 'zsh', 'fish']))
    .addHelpText(
      'after',
      '\nInstall: bash: source <(proxyctl completion bash)   zsh: source <(proxyctl completion zsh)   fish: proxyctl completion fish | source',
    )
    .action(async (shell: 'bash' | 'zsh' | 'fish', _o: unknown, cmd: Command) =>
      run(cmd, async (_ctx, deps) => {
        const { completionScript } = await import('../completion.js');
        deps.io.stdout.write(completionScript(shell, cmd.parent!));
        return Exit.OK;
      }),
    );
}
