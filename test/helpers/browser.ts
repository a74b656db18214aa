// Debian's chromium through playwright-core, started as the console tests need it (root, no network beyond loopback).
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/** Logs in through the console's form and waits for the account page. */
export async function signIn(
  page: import('playwright-core').Page,
  api: string,
  email: string,
  password: string,
): Promise<void> {
  await page.goto(`${api}/console/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL('**/console/account');
}
