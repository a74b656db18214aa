export * from './codes.js';
export * from './token.js';
export * from './ipv4.js';
export * from './paths.js';
export * from './password.js';
export * from './schemas.js';
export * from './proxy-username.js';
export * from './scopes.js';
