/**
 * An error the operator can fix (bad flag, bad env file, group not running). The CLI prints its
 * message without a stack trace and exits with `exitCode`.
 */
export class UserError extends Error {
  override name = 'UserError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}
