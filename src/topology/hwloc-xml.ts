import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { TopocollError, type ErrorLocation } from '../errors.js';
import { parseHwlocCpuset } from './index-list.js';
import type { MachineTopology, ObjectKind, TopologyObject } from './types.js';
import { readTextFile } from '../util/read-text-file.js';
import { positionAt } from '../util/position.js';

/**
 * Reads hwloc's XML export (`lstopo --of xml`, format versions 2.x and 3.x) into the topology
 * model. Only the kinds PMIx locality strings name are kept; the logical indices are recomputed
 * the way hwloc numbers objects, because the file does not store them and they are what PMIx
 * prints.
 */

/** What each hwloc object type is to us: a kind, a container to walk through, or I/O to skip. */
type TypeRole = ObjectKind | 'walk' | 'skip';

const TYPE_ROLE: Readonly<Record<string, TypeRole>> = {
  Machine: 'walk',
  Package: 'socket',
  Die: 'walk',
  Group: 'walk',
  NUMANode: 'numa',
  MemCache: 'walk',
  L1Cache: 'l1',
  L2Cache: 'l2',
  L3Cache: 'l3',
  L4Cache: 'walk',
  L5Cache: 'walk',
  L1iCache: 'walk',
  L2iCache: 'walk',
  L3iCache: 'walk',
  Core: 'core',
  PU: 'pu',
  // I/O and Misc objects have no cpuset; their subtrees hold only more of them.
  Bridge: 'skip',
  PCIDev: 'skip',
  OSDev: 'skip',
  Misc: 'skip',
};

/** hwloc 1.x names that do not exist in 2.x; their presence identifies an old export. */
const V1_TYPES = new Set(['Socket', 'Cache', 'System']);

/** hwloc's `cache_type` attribute value for an instruction cache (0 unified, 1 data). */
const INSTRUCTION_CACHE = '2';

const REEXPORT_HINT = 'Re-export it with hwloc 2 or later: lstopo-no-graphics --of xml --no-io > machine.xml.';

/**
 * Limits that keep fast-xml-parser within bounded time and memory (its cost grows per element
 * or attribute, and per byte of one large text or attribute).
 * hwloc's largest exports stay within half of them: Linux runs at most 8192 CPUs (NR_CPUS), a live
 * export without I/O objects has 8 elements and 56 attributes per PU when every core has one PU
 * (three caches with an info element each, the core, the PU), and a cpuset of 2^20 bits, the most
 * any index list here may have, is 360 KB of text.
 */
export const XML_LIMITS = {
  /** Nesting of elements: hwloc's trees are about 15 deep; the parser and the reader recurse per level. */
  depth: 128,
  /** Elements in the document. */
  elements: 1 << 17,
  /** Attributes in the document. */
  attributes: 1 << 20,
  /** Attributes of one element (hwloc objects have at most about 16). */
  attributesPerElement: 64,
  /** Characters of one tag, or of one run of text or CDATA between tags. */
  markupChars: 1 << 20,
} as const;

const PARSER = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  isArray: (name, _path, _leaf, isAttribute) => !isAttribute && name === 'object',
  parseTagValue: false,
  parseAttributeValue: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  captureMetaData: true,
  // hwloc writes no entity declarations, and none of the attributes read here holds a reference.
  processEntities: false,
  maxNestedTags: XML_LIMITS.depth + 1,
});

const META = XMLParser.getMetaDataSymbol() as unknown as symbol;

/** A parsed element: attributes under `@_name`, child elements by tag name. */
type XmlElement = Record<string, unknown>;

/** Parses the text of an hwloc XML file; `file` is used in `source` and in error messages. */
export function parseHwlocXml(xmlText: string, file: string): MachineTopology {
  checkXmlShape(xmlText, file);
  let doc: Record<string, unknown>;
  try {
    const validation = XMLValidator.validate(xmlText);
    if (validation !== true) {
      const { msg, line, col } = validation.err;
      throw new TopocollError('ETOPOLOGY', `malformed XML: ${msg}`, { file, line, column: col });
    }
    doc = PARSER.parse(xmlText) as Record<string, unknown>;
  } catch (cause) {
    if (cause instanceof TopocollError) throw cause;
    throw new TopocollError('ETOPOLOGY', `malformed XML: ${(cause as Error).message}`, { file, cause });
  }
  const reader = new HwlocReader(xmlText, file);
  const rootName = Object.keys(doc)[0] ?? '';
  const root = doc[rootName];
  if (rootName !== 'topology') {
    throw new TopocollError('ETOPOLOGY', `the root element is <${rootName}>, not <topology>: not an hwloc XML file`, {
      ...reader.locate(root),
      hint: 'Export the machine with lstopo-no-graphics --of xml --no-io.',
    });
  }
  const topology = isElement(root) ? root : {};
  reader.checkVersion(topology);
  const top = elementsOf(topology);
  if (top.length !== 1) {
    throw new TopocollError('ETOPOLOGY', `<topology> must contain exactly one root <object>, found ${top.length}`, reader.locate(root));
  }
  reader.visit(top[0]);
  return reader.result();
}

/**
 * Refuses, before the XML parser sees them, documents beyond XML_LIMITS and DTD internal subsets
 * (`<!DOCTYPE t [ <!ENTITY …> ]>`, the vehicle of entity expansion bombs and external entities;
 * hwloc writes only `<!DOCTYPE topology SYSTEM "hwloc2.dtd">`). One linear scan over the markup;
 * anything malformed is left to the validator.
 */
function checkXmlShape(text: string, file: string): void {
  const fail = (offset: number, detail: string): never => {
    throw new TopocollError('ETOPOLOGY', detail, { file, ...positionAt(text, offset), hint: XML_HINT });
  };
  const limits = XML_LIMITS;
  let depth = 0;
  let elements = 0;
  let attributes = 0;
  // `after` is where the text following the previous markup starts.
  for (let after = 0, i = text.indexOf('<'); i >= 0; after = i + 1, i = text.indexOf('<', i + 1)) {
    if (i - after > limits.markupChars) fail(after, `a text of more than ${limits.markupChars} characters, the limit for an hwloc XML file`);
    const skipped = SKIPPED_MARKUP.find(([open]) => text.startsWith(open, i));
    if (skipped !== undefined) {
      const [open, close, isText] = skipped;
      const end = text.indexOf(close, i + open.length);
      if (end < 0) return;
      if (isText && end - i > limits.markupChars) fail(i, `a CDATA section of more than ${limits.markupChars} characters, the limit for an hwloc XML file`);
      i = end + close.length - 1;
      continue;
    }
    const tag = scanTag(text, i);
    if (tag.end < 0) return;
    if (tag.end - i > limits.markupChars) fail(i, `a tag of more than ${limits.markupChars} characters, the limit for an hwloc XML file`);
    const second = text.charCodeAt(i + 1);
    if (second === 0x21 /* <! */) {
      if (text.charCodeAt(tag.end) === 0x5b /* [ */) {
        fail(i, 'the document type declaration has an internal subset (entity or element declarations), which hwloc XML never has');
      }
    } else if (second === 0x2f /* </ */) {
      depth--;
    } else {
      if (++elements > limits.elements) fail(i, `the document has more than ${limits.elements} elements, the limit for an hwloc XML file`);
      if (tag.attributes > limits.attributesPerElement) {
        fail(i, `an element has more than ${limits.attributesPerElement} attributes, the limit for an hwloc XML file`);
      }
      attributes += tag.attributes;
      if (attributes > limits.attributes) fail(i, `the document has more than ${limits.attributes} attributes, the limit for an hwloc XML file`);
      if (text.charCodeAt(tag.end - 1) !== 0x2f /* /> */ && ++depth > limits.depth) {
        fail(i, `elements nest more than ${limits.depth} deep, the limit for an hwloc XML file`);
      }
    }
    i = tag.end;
  }
}

/** Markup the scan steps over: comments and processing instructions, and CDATA, which is text. */
const SKIPPED_MARKUP: readonly (readonly [open: string, close: string, isText: boolean])[] = [
  ['<!--', '-->', false],
  ['<![CDATA[', ']]>', true],
  ['<?', '?>', false],
];

const XML_HINT = 'Check that this is an hwloc export: lstopo-no-graphics --of xml --no-io > machine.xml.';

/**
 * The tag starting at `start`: the index of the `>` that ends it (or of a `[` opening a DTD
 * internal subset; -1 when there is none), skipping quoted values, and its number of `=`
 * outside quotes, which is its number of attributes in a well-formed document.
 */
function scanTag(text: string, start: number): { end: number; attributes: number } {
  const declaration = text.charCodeAt(start + 1) === 0x21;
  let quote = 0;
  let attributes = 0;
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (quote !== 0) {
      if (c === quote) quote = 0;
    } else if (c === 0x22 || c === 0x27) {
      quote = c;
    } else if (c === 0x3d) {
      attributes++;
    } else if (c === 0x3e || (c === 0x5b && declaration)) {
      return { end: i, attributes };
    }
  }
  return { end: -1, attributes };
}

/** Reads an hwloc XML file; a file that cannot be read is an ETOPOLOGY error naming it. */
export function readHwlocXmlFile(path: string): MachineTopology {
  return parseHwlocXml(readTextFile(path, 'ETOPOLOGY', 'hwloc XML file'), path);
}

function isElement(value: unknown): value is XmlElement {
  return typeof value === 'object' && value !== null;
}

/** The `<object>` children of an element (an attribute-less `<object/>` parses as ''). */
function elementsOf(el: XmlElement): unknown[] {
  const children = el['object'];
  return Array.isArray(children) ? children : [];
}

function attr(el: XmlElement, name: string): string | undefined {
  const value = el[`@_${name}`];
  return typeof value === 'string' ? value : undefined;
}

/** Walks the object tree once, numbering the objects of each kind as hwloc does. */
class HwlocReader {
  private readonly objects: Partial<Record<ObjectKind, TopologyObject[]>> = {};
  private readonly puSet = new Set<number>();

  constructor(
    private readonly text: string,
    private readonly file: string,
  ) {}

  /** The file, line and column where an element starts, as far as the parser recorded it. */
  locate(el: unknown): ErrorLocation {
    const meta = isElement(el) ? ((el as Record<symbol, unknown>)[META] as { startIndex?: number } | undefined) : undefined;
    const start = meta?.startIndex;
    if (start === undefined) return { file: this.file };
    let line = 1;
    let lineStart = 0;
    for (let i = this.text.indexOf('\n'); i >= 0 && i < start; i = this.text.indexOf('\n', i + 1)) {
      line++;
      lineStart = i + 1;
    }
    return { file: this.file, line, column: start - lineStart + 1 };
  }

  /** Accepts format 2.x and 3.x; a missing version is how hwloc itself recognises a 1.x file. */
  checkVersion(topology: XmlElement): void {
    const version = attr(topology, 'version');
    if (version === undefined) {
      throw new TopocollError('ETOPOLOGY', 'this is an hwloc 1.x XML file (<topology> has no version), which is not supported', {
        ...this.locate(topology),
        hint: REEXPORT_HINT,
      });
    }
    const major = /^(\d+)\.\d+$/.exec(version)?.[1];
    if (major !== '2' && major !== '3') {
      throw new TopocollError('ETOPOLOGY', `unsupported hwloc XML version "${version}" (2.x and 3.x are supported)`, this.locate(topology));
    }
  }

  /**
   * Visits an object and its subtree. hwloc numbers the objects of a level left to right,
   * which is document order for the CPU-side tree; NUMA nodes, however, are memory children
   * that the file writes first but hwloc numbers after the normal children of the same parent
   * (`hwloc_list_special_objects`), so they are visited last.
   */
  visit(node: unknown): void {
    if (!isElement(node)) {
      throw new TopocollError('ETOPOLOGY', 'an <object> element has no type attribute', { file: this.file });
    }
    const type = attr(node, 'type');
    if (type === undefined) throw this.error(node, 'an <object> element has no type attribute');
    if (V1_TYPES.has(type)) {
      throw this.error(node, `object type "${type}" is from hwloc 1.x, whose XML format is not supported`, REEXPORT_HINT);
    }
    const role = TYPE_ROLE[type];
    if (role === undefined) throw this.error(node, `unknown hwloc object type "${type}"`);
    if (role === 'skip') return;
    if (role !== 'walk' && !(role === 'l1' && attr(node, 'cache_type') === INSTRUCTION_CACHE)) this.record(node, type, role);
    const memory: unknown[] = [];
    for (const child of elementsOf(node)) {
      const childType = isElement(child) ? attr(child, 'type') : undefined;
      if (childType === 'NUMANode' || childType === 'MemCache') memory.push(child);
      else this.visit(child);
    }
    for (const child of memory) this.visit(child);
  }

  private record(node: XmlElement, type: string, kind: ObjectKind): void {
    const cpuset = attr(node, 'cpuset');
    if (cpuset === undefined) throw this.error(node, `${type} object has no cpuset attribute`);
    const pus = parseHwlocCpuset(cpuset, this.locate(node));
    const osText = attr(node, 'os_index');
    let osIndex: number | undefined;
    if (osText !== undefined) {
      if (!/^\d{1,9}$/.test(osText)) throw this.error(node, `${type} object has an invalid os_index "${osText}"`);
      osIndex = Number(osText);
    }
    if (kind === 'pu') {
      if (osIndex === undefined) throw this.error(node, 'PU object has no os_index attribute');
      if (this.puSet.has(osIndex)) throw this.error(node, `PU P#${osIndex} appears twice`);
      this.puSet.add(osIndex);
    }
    const list = (this.objects[kind] ??= []);
    const object: TopologyObject = { logicalIndex: list.length, pus };
    if (osIndex !== undefined) object.osIndex = osIndex;
    list.push(object);
  }

  private error(node: XmlElement, detail: string, hint?: string): TopocollError {
    return new TopocollError('ETOPOLOGY', detail, { ...this.locate(node), hint });
  }

  result(): MachineTopology {
    if (this.puSet.size === 0) throw new TopocollError('ETOPOLOGY', 'the topology has no PU objects', { file: this.file });
    return {
      source: `hwloc-xml:${this.file}`,
      pus: [...this.puSet].sort((a, b) => a - b),
      objects: this.objects,
    };
  }
}
