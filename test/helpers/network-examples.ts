import { readFileSync } from 'node:fs';

/** The example files shipped in config/examples. */
export function exampleFile(name: string): string {
  return readFileSync(new URL(`../../config/examples/${name}`, import.meta.url), 'utf8');
}

/** topology.shtml's first example: a binary tree of eight nodes (leaves s0–s3, s4, s5, top s6). */
export const BINARY_TREE_CONF = `# topology.conf
# Switch Configuration
SwitchName=s0 Nodes=tux[0-1]
SwitchName=s1 Nodes=tux[2-3]
SwitchName=s2 Nodes=tux[4-5]
SwitchName=s3 Nodes=tux[6-7]
SwitchName=s4 Switches=s[0-1]
SwitchName=s5 Switches=s[2-3]
SwitchName=s6 Switches=s[4-5]
`;

/** The reference's unbalanced tree: a[0-1] reach the top switch without a level-1 switch. */
export const UNBALANCED_CONF = `SwitchName=top Switches=s0,s2
SwitchName=s2 Switches=s1
SwitchName=s0 Nodes=a[0-1]
SwitchName=s1 Nodes=b[0-1]
`;
