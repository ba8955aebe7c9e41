#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include "kernels/nm_spmv_cpu.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static uint32_t rs=7; static uint32_t rnd(void){rs=rs*1664525u+1013904223u;return rs>>8;}
static void run_split(const uint16_t*v,const uint32_t*m,int64_t rows,int64_t cols,const float*x,int B,float*y,int even){
  int ng=(B+7)/8;
  for(int b0=0,k=0;k<ng;k++){int g= even ? (B-b0+(ng-k)-1)/(ng-k) : (B-b0<8?B-b0:8);
    sd_nm_spmv_cpu(v,m,rows,cols,x+(int64_t)b0*cols,cols,g,y+(int64_t)b0*rows,rows); b0+=g;}
}
int main(void){
  int64_t rows=4096, cols=4096;
  uint32_t*mask=malloc(rows*cols/32*4); uint16_t*vals=malloc(rows*cols/2*2);
  for(int64_t i=0;i<rows*cols/32;i++){ uint32_t m=0; for(int g=0;g<8;g++){int a=rnd()%4,b=(a+1+rnd()%3)%4; m|=(1u<<(4*g+a))|(1u<<(4*g+b));} mask[i]=m;}
  for(int64_t i=0;i<rows*cols/2;i++) vals[i]=0x3c00+(rnd()%512);
  float*x=malloc(64*cols*4),*y=malloc(64*rows*4); for(int64_t i=0;i<64*cols;i++) x[i]=(rnd()%100)/50.f;
  int Bs[]={9,10,11,12,13,17,20,25};
  for(int bi=0;bi<8;bi++){int B=Bs[bi]; double best[2]={1e9,1e9};
    for(int rep=0;rep<8;rep++) for(int k=0;k<2;k++){double t0=now(); run_split(vals,mask,rows,cols,x,B,y,k); double t=now()-t0; if(t<best[k])best[k]=t;}
    printf("2:4 4096x4096 B=%d: 8+rest %.2f ms  even %.2f ms  (%.2fx)\n",B,best[0],best[1],best[0]/best[1]);}
}
