/*
 * TCP keepalive on the sockets UCX accepted (aml_ucx_keepalive.c), for the UCX transport
 * (aml_ucx.c): mark this process's listeners before the worker exists, find the worker's
 * after, start watching once a peer is on another host, free (stopping the watch) before the
 * worker goes. count: sockets armed. Not part of the API.
 */
#ifndef AML_UCX_KEEPALIVE_H_INCLUDED
#define AML_UCX_KEEPALIVE_H_INCLUDED

#define AML_KEEPALIVE_PROBES 3
struct aml_ucx_ka *aml_ucx_ka_mark(int secs);
void aml_ucx_ka_listeners(struct aml_ucx_ka *k);
void aml_ucx_ka_sweep(struct aml_ucx_ka *k);
void aml_ucx_ka_start(struct aml_ucx_ka *k);
unsigned long aml_ucx_ka_count(const struct aml_ucx_ka *k);
void aml_ucx_ka_free(struct aml_ucx_ka *k);

#endif /* AML_UCX_KEEPALIVE_H_INCLUDED */
