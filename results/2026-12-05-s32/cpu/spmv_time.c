#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include "kernels/nm_spmv_cpu.h"
void prev_spmv(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B, float *y, int64_t ldy);
void old_spmv(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B, float *y, int64_t ldy);
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static uint32_t rs=7; static uint32_t rnd(void){rs=rs*1664525u+1013904223u;return rs>>8;}
int main(int argc,char**argv){
  int64_t rows=4096, cols=4096; int Bs[6]={1,2,3,4,5,8};
  for (int pat=0;pat<2;pat++){ /* 0: 2:4, 1: 8:16 */
  uint32_t*mask=malloc(rows*cols/32*4); uint16_t*vals=malloc(rows*cols/2*2); uint16_t*dense=malloc(rows*cols*2);
  for(int64_t i=0;i<rows*cols/32;i++){ uint32_t m=0;
    if(pat==0) for(int g=0;g<8;g++){int a=rnd()%4,b=(a+1+rnd()%3)%4; m|=(1u<<(4*g+a))|(1u<<(4*g+b));}
    else for(int h=0;h<2;h++){int c=0; while(c<8){int j=rnd()%16; if(!(m>>(16*h+j)&1)){m|=1u<<(16*h+j);c++;}}}
    mask[i]=m;}
  for(int64_t i=0;i<rows*cols/2;i++) vals[i]=0x3c00+(rnd()%512);
  for(int64_t i=0;i<rows*cols;i++) dense[i]=0x3c00+(rnd()%512);
  float*x=malloc(16*cols*4),*y=malloc(16*rows*4); for(int64_t i=0;i<16*cols;i++) x[i]=(rnd()%100)/50.f;
  for(int bi=0;bi<6;bi++){int B=Bs[bi];
    double best[4]={1e9,1e9,1e9,1e9};
    for(int rep=0;rep<6;rep++) for(int k=0;k<4;k++){ double t0=now();
      if(k==0) old_spmv(vals,mask,rows,cols,x,cols,B,y,rows);
      else if(k==1) sd_nm_spmv_cpu(vals,mask,rows,cols,x,cols,B,y,rows);
      else if(k==2) sd_gemv_bf16_cpu(dense,rows,cols,x,cols,B,y,rows);
      else prev_spmv(vals,mask,rows,cols,x,cols,B,y,rows);
      double t=now()-t0; if(t<best[k])best[k]=t;}
    printf("%s B=%d: s31 %.2f ms  6b7ac5b %.2f ms  now %.2f ms (%.2fx s31, %.2fx 6b7ac5b)  dense gemv twin %.2f ms\n", pat?"8:16":"2:4",B,best[0],best[3],best[1],best[0]/best[1],best[3]/best[1],best[2]);}
  free(mask);free(vals);free(dense);free(x);free(y);}
}
