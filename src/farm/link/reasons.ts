/**
 * The node's side of the portal connection, what its log says about a failure: an error, a refused upgrade, a
 * close code, in words (docs/farm.md, "The node's connection"). A leaf: pure functions, no imports.
 */

export function describeError(e: unknown): string {
  if (e instanceof Error) return (e as NodeJS.ErrnoException).code ? `${(e as NodeJS.ErrnoException).code}: ${e.message}` : e.message;
  return String(e);
}

/** A refused upgrade says what to do: the credential, or the node's registration. */
export function refusal(reason: string): string | undefined {
  const m = /Unexpected server response: (\d+)/.exec(reason);
  if (!m) return undefined;
  const status = Number(m[1]);
  if (status === 401 || status === 403) {
    return `the portal refused the node's credential (${status}): register the node on the portal ('farmhand farm node add <node_id>') and put the credential it prints in portal.node_credential_file; retrying`;
  }
  return `the portal refused the connection (${status}); retrying`;
}

export function closeMeaning(code: number): string {
  if (code === 1001) return 'the portal is going away';
  if (code === 1006) return 'the connection was lost';
  return `closed (${code})`;
}
