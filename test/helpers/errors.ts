/** Error answers: the status, a JSON body, the error code, and a message that says what to do. */
import { expect } from 'chai';

interface Answer {
  status: number;
  type: string;
  body: unknown;
}

export function expectError(res: Answer, status: number, code: string, what = ''): void {
  const at = what ? `${what}: ` : '';
  const body = res.body as { error?: unknown; message?: unknown };
  expect(res.status, `${at}status (body ${JSON.stringify(res.body)})`).to.equal(status);
  expect(res.type, `${at}content type`).to.equal('application/json');
  expect(body.error, `${at}error code`).to.equal(code);
  expect(body.message, `${at}message`).to.be.a('string').and.not.equal('');
}
