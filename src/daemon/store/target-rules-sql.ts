// target_rules rows as both backends read and write them: canonical items joined by commas (an item never holds one).
export function splitItems(text: string): string[] {
  return text === '' ? [] : text.split(',');
}

export function joinItems(items: readonly string[]): string {
  return items.join(',');
}
