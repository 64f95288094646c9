/**
 * @arbiterhq/sdk: the TypeScript client of Arbiter, a verification task
 * service. An application asks a closed question with the verdicts it
 * allows; Arbiter's verifier answers first, and a person decides when it
 * is not confident enough.
 */
export * from "./client.js";
export * from "./errors.js";
export * from "./integrity.js";
export * from "./webhooks.js";
export type { components, paths } from "./wire.js";
