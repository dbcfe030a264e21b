// SPDX-License-Identifier: MIT
/* <uslab/uslab.hpp> compiles with -fno-exceptions (failures then abort). */
#include <uslab/uslab.hpp>

#include <vector>

struct Node {
	int v;
	explicit Node(int x) : v(x)
	{
	}
};

int use(uslab::cache<Node> &c)
{
	Node *n = c.make(3);
	std::vector<int, uslab::allocator<int>> v(10, 1);
	int r = n->v + v[9];

	c.destroy(n);
	return r;
}
