/*
 * udp.h -- memcached's UDP transport (-U PORT).
 *
 * Each datagram is one frame: an 8-byte header (request id, sequence
 * number, datagram count, reserved: big-endian 16 bits each), then
 * requests that fit in it, ASCII or binary as on TCP. The answers go back
 * to the sender in datagrams of at most UDP_DATAGRAM_MAX bytes, each with
 * the request id, its sequence number and the count. Every worker reads
 * from every UDP socket; the kernel hands each datagram to one of them.
 */
#ifndef SC_UDP_H
#define SC_UDP_H

#include <stdbool.h>

#define UDP_HEADER_SIZE   8
#define UDP_DATAGRAM_MAX  1400   /* memcached's UDP_MAX_PAYLOAD_SIZE, header included */
/* The most one request's answer may hold: a TCP connection's output bound.
 * A multi-get past it is answered "SERVER_ERROR out of memory writing get
 * response" (memcached's text for an answer it cannot build), so a 64 KB
 * datagram cannot make an answer of any size. */
#define UDP_ANSWER_MAX    (1024u * 1024)

struct event_base;
struct stats_thread;
struct udp_conn;

/* A worker's reader of the UDP socket fd; NULL if memory runs out. */
struct udp_conn *udp_conn_new(int fd, struct event_base *base, struct stats_thread *st);
void             udp_conn_free(struct udp_conn *u);

#endif
