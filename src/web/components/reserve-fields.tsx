/**
 * The fields of a reservation request, the same on the node's front door and
 * the farm's: a message everyone sees and, optionally, a length in minutes.
 * `prefix` keeps the ids apart (`res-` on the node's page, `farm-res-` on the
 * farm's); the page's script reads the fields by name.
 */
import type { VNode } from 'preact';

export function ReserveFields({ prefix }: { prefix: string }): VNode {
  const error = `${prefix}error`;
  return (
    <>
      <div class="field">
        <label for={`${prefix}message`}>Message (what you are doing; everyone sees it)</label>
        <input id={`${prefix}message`} name="message" required maxLength={10000} aria-describedby={error} />
      </div>
      <div class="field">
        <label for={`${prefix}minutes`}>For how many minutes (empty: until you end it)</label>
        <input id={`${prefix}minutes`} name="minutes" type="number" min="1" step="1" inputMode="numeric" aria-describedby={error} />
      </div>
    </>
  );
}
