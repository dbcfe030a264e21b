-- SPDX-License-Identifier: MIT
-- workload.sql - an sqlite3 workload for tests/preload/run.sh: 100k rows
-- from a recursive CTE, indexes, joins, GROUP BY, a sort, an UPDATE and a
-- DELETE, every result printed (deterministic: no random(), every ORDER BY
-- total).
.bail on
.headers off
.mode list
PRAGMA cache_size = -20000;

CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT NOT NULL, region INTEGER NOT NULL);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER NOT NULL, amount INTEGER NOT NULL,
                    note TEXT NOT NULL);

WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000)
INSERT INTO customers SELECT x, 'customer-' || x, x % 7 FROM c;

-- Notes of 8..~110 bytes, so rows and records of many sizes.
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
INSERT INTO orders
SELECT x, (x * 7919) % 1000 + 1, (x * 31) % 1000,
       'n' || x || '-' || replace(hex(zeroblob(x % 50)), '00', 'ab')
FROM c;

CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_amount ON orders(amount, id);
CREATE INDEX orders_note ON orders(note);

SELECT 'orders', count(*), sum(amount), sum(length(note)) FROM orders;
SELECT 'customers', count(*), sum(region) FROM customers;

SELECT 'region', c.region, count(*), sum(o.amount), max(length(o.note))
FROM orders o JOIN customers c ON c.id = o.customer
GROUP BY c.region ORDER BY c.region;

SELECT 'top', customer, count(*) AS n, max(amount) FROM orders
GROUP BY customer ORDER BY n DESC, customer LIMIT 5;

SELECT 'sorted', sum(x) FROM (SELECT id * amount AS x FROM orders ORDER BY note DESC, id LIMIT 50000);

SELECT 'amount-range', count(*), min(id), max(id) FROM orders WHERE amount BETWEEN 100 AND 120;

UPDATE orders SET amount = amount * 2, note = note || '-updated' WHERE id % 3 = 0;
SELECT 'updated', count(*), sum(amount) FROM orders WHERE note LIKE '%-updated';

DELETE FROM orders WHERE amount > 1500 OR customer IN (SELECT id FROM customers WHERE region = 3);
SELECT 'after-delete', count(*), sum(amount), sum(length(note)) FROM orders;

SELECT 'per-region-after', c.region, count(o.id), coalesce(sum(o.amount), 0)
FROM customers c LEFT JOIN orders o ON o.customer = c.id
GROUP BY c.region ORDER BY c.region;

SELECT 'group-concat', length(group_concat(name, ',')) FROM (SELECT name FROM customers ORDER BY name);

DROP INDEX orders_note;
VACUUM;
PRAGMA integrity_check;
