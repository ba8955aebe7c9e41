#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "engine/backend.h"
#include "engine/model.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){
  sd_model*m=NULL; sd_diag d={0};
  if(sd_model_open(&m,argv[1],&d)<0){fprintf(stderr,"%s\n",d.msg);return 1;}
  sd_backend_opts bo; sd_backend_opts_default(&bo); bo.kv_blocks=64; bo.n_threads=2;
  sd_backend*b=NULL; if(sd_backend_cpu_init(&b,m,&bo,&d)<0){fprintf(stderr,"%s\n",d.msg);return 1;}
  int32_t bt[64]; for(int i=0;i<64;i++)bt[i]=i;
  int32_t tok[600]; for(int i=0;i<600;i++)tok[i]=(i*37)%b->vocab;
  float*lg=malloc(sizeof(float)*b->vocab*16);
  sd_batch_seq q={0,300,tok,bt,0}; sd_backend_forward(b,&q,1,lg,&d);
  int Ts[]={1,2,3,5,9};
  for(int k=0;k<5;k++){int T=Ts[k]; double best=1e9;
    for(int r=0;r<20;r++){ sd_batch_seq s={300,T,tok+300,bt,T>1}; double t0=now(); sd_backend_forward(b,&s,1,lg,&d); double t=now()-t0; if(t<best)best=t;}
    printf("T=%d: %.3f ms\n",T,best);}
  return 0;}
