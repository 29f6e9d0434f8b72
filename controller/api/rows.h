/*
 * controller/api/rows.h: the JSON row templates (SQL fragments) that every
 * route answering a job, node, pool or decision uses, so a row has one
 * spelling everywhere; and the default page size of the lists.
 */
#ifndef TM_API_ROWS_H
#define TM_API_ROWS_H



#define JOB_JSON                                                                                   \
    "json_build_object('id', j.id, 'team', j.team, 'name', j.name, 'command', j.command,"         \
    " 'gpus', j.gpus, 'gpu_milli', j.gpu_milli, 'nodes', j.nodes, 'cpu_milli', j.cpu_milli,"      \
    " 'memory_mib', j.memory_mib, 'gpu_model', j.gpu_model, 'pool', j.pool, 'class', j.class,"    \
    " 'priority', j.priority, 'preemptible', j.preemptible, 'checkpointable', j.checkpointable,"  \
    " 'runtime_estimate_s', j.runtime_estimate_ms / 1000, 'deadline_ms', j.deadline_ms,"          \
    " 'state', j.state, 'state_reason', j.state_reason, 'attempts', j.attempts,"                  \
    " 'node_id', j.node_id, 'submitted_ms', j.submitted_ms, 'started_ms', j.started_ms,"          \
    " 'finished_ms', j.finished_ms, 'env', j.env, 'image', j.image, 'exit_code', j.exit_code,"  \
    " 'signal', j.exit_signal, 'output_tail', j.output_tail, 'exit_rank', j.exit_rank,"          \
    " 'exit_node_id', j.exit_node_id, 'members', tarmac_job_members(j.id))::text"

#define NODE_JSON                                                                                  \
    "json_build_object('id', n.id, 'pool', n.pool, 'instance_id', n.instance_id, 'zone', n.zone," \
    " 'instance_type', n.instance_type, 'gpus', n.gpus, 'gpu_model', n.gpu_model,"                \
    " 'cpu_milli', n.cpu_milli, 'memory_mib', n.memory_mib, 'capacity_type', n.capacity_type,"    \
    " 'state', n.state, 'state_reason', n.state_reason, 'cordoned', n.cordoned,"                  \
    " 'price_uusd_per_hour', n.price_uusd_per_hour, 'requested_ms', n.requested_ms,"              \
    " 'ready_ms', n.ready_ms, 'idle_since_ms', n.idle_since_ms, 'terminated_ms', n.terminated_ms,"\
    " 'last_heartbeat_ms', n.last_heartbeat_ms, 'address', n.address, 'power', n.power,"         \
    " 'power_since_ms', n.power_since_ms)::text"

#define POOL_JSON                                                                                  \
    "json_build_object('name', p.name, 'provider', p.provider, 'provider_kind', p.provider_kind," \
    " 'region', p.region, 'zones', p.zones, 'instance_types', p.instance_types,"                  \
    " 'gpu_model', p.gpu_model, 'gpus_per_node', p.gpus_per_node,"                                \
    " 'capacity_type', p.capacity_type, 'min_nodes', p.min_nodes, 'max_nodes', p.max_nodes,"      \
    " 'idle_grace_ms', p.idle_grace_ms, 'live_nodes', (SELECT count(*) FROM nodes x"              \
    "   WHERE x.pool = p.name AND x.state NOT IN ('terminated', 'interrupted')))::text"

#define DECISION_JSON                                                                              \
    "json_build_object('id', d.id, 'at_ms', d.at_ms, 'kind', d.kind,"                             \
    " 'subject_kind', d.subject_kind, 'subject_id', d.subject_id, 'reason', d.reason,"            \
    " 'inputs', d.inputs)::text"

#define DEFAULT_PAGE 100

#endif
