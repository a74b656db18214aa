// The caller's IPv4 as the API sees it (after trusted X-Forwarded-For, which Fastify's trustProxy handles).
import type { FastifyRequest } from 'fastify';

function normalizeIp(ip: string): string {
  return ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
}

export function sourceIp(request: FastifyRequest): string {
  return normalizeIp(request.ip);
}
