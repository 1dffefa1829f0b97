// The pages of the UI, in navigation order; the first is the start page. A new page is one
// module in this folder, one line here and one asset line in crates/management/src/ui.rs.

import overview from './overview.js';
import queues from './queues.js';
import queue from './queue.js';
import exchanges from './exchanges.js';
import connections from './connections.js';
import kafka from './kafka.js';
import topic from './topic.js';
import group from './group.js';
import shareGroup from './share-group.js';
import routes from './routes.js';
import route from './route.js';

export default [overview, queues, queue, exchanges, connections, kafka, topic, group, shareGroup, routes, route];
