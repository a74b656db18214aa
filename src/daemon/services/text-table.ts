// Aligned columns for the operator's `--format table` outputs (`proxyd admin usage`, `connections`, `exits`).

/** Each column's width: its longest cell over `rows` (a header among them). */
export function columnWidths(rows: ReadonlyArray<readonly string[]>): number[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return widths;
}

/**
 * One line of cells two spaces apart, each padded to its column's width (a longer one widens its line, never
 * cut): right-aligned where `right(i)` says so (numbers), else left; no trailing spaces.
 */
export function alignedLine(
  cells: readonly string[],
  widths: readonly number[],
  right: (column: number) => boolean = () => false,
): string {
  return cells
    .map((c, i) => (right(i) ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
    .join('  ')
    .trimEnd();
}
