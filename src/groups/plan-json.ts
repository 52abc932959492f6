import type { GroupPlan } from './plan.js';

/**
 * The JSON form of a plan that `topocoll groups --json` prints. Other tools read it, so its
 * shape is fixed: `{"levels":[…], "ranks":[{"rank","node","locality","groups":[{"level",
 * "members","leader"}]}], "dropped":[{"node","level","reason"}]}`.
 */
export interface GroupPlanJson {
  levels: string[];
  ranks: {
    rank: number;
    node: string;
    locality: string;
    groups: { level: string; members: number[]; leader: number }[];
  }[];
  dropped: { node: string; level: string; reason: string }[];
}

export function planToJson(plan: GroupPlan): GroupPlanJson {
  return {
    levels: [...plan.levels],
    ranks: plan.placements.map((p) => ({
      rank: p.rank,
      node: p.node,
      locality: p.locality ?? '',
      groups: plan.chain(p.rank).map((g) => ({ level: g.level, members: g.members, leader: g.leader })),
    })),
    dropped: plan.dropped.map((d) => ({ node: d.node, level: d.level, reason: d.reason })),
  };
}
