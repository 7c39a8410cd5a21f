/**
 * The test pack's INI configuration as flat sections of strings. npm `ini`
 * nests dotted section names (`[a.b]` -> `{a: {b: ...}}`) and turns `true`,
 * `false` and `null` into JSON values; this undoes both so that
 * `config['a.b']['key']` is always the string written in the file.
 */
import { parse } from 'ini';
import type { IniConfig } from '../core/ports.js';

type IniValue = string | boolean | null | IniValue[] | { [k: string]: IniValue };

/** Parse INI text into `{ section: { key: value } }`; keys before the first section are dropped. */
export function parseIniConfig(text: string): IniConfig {
  const out: IniConfig = Object.create(null) as IniConfig;
  const root = parse(text) as Record<string, IniValue>;
  for (const [name, value] of Object.entries(root)) {
    if (isSection(value)) flatten(name, value, out);
  }
  return out;
}

function isSection(v: IniValue): v is { [k: string]: IniValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function flatten(name: string, section: { [k: string]: IniValue }, out: IniConfig): void {
  const own: Record<string, string> = (out[name] ??= Object.create(null) as Record<string, string>);
  for (const [key, value] of Object.entries(section)) {
    if (isSection(value)) flatten(`${name}.${key}`, value, out);
    else own[key] = scalar(value);
  }
}

/** `key[] = a` lines become an array in `ini`; the last value wins, as for a repeated plain key. */
function scalar(v: IniValue): string {
  if (Array.isArray(v)) return v.length ? scalar(v[v.length - 1] as IniValue) : '';
  if (v === null) return 'null';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}
